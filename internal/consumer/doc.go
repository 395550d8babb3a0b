// Package consumer runs side effects: the workers that carry out the
// commands waiting in OUTBOX, exactly once in effect.
//
// One durable pull consumer per command kind (esjet-worker-<kind> on
// <ns>.outbox.<kind>) is shared by every node; each node runs a pool of
// workers per kind and pulls only as many messages as it has free workers,
// so no lease starts before its work does. While a handler runs, the worker
// keeps the lease alive with in-progress heartbeats; a handler past its
// deadline is cancelled through its context.
//
// Outcomes:
//   - success → a receipt in KV <ns>_receipts (once per command id) → the
//     result back to the issuing aggregate as <kind>_done when the decision
//     asked for it (idempotency key: the command id) → ack, waiting for the
//     server to confirm it;
//   - retryable error → nak with exponential backoff and jitter (or the
//     handler's retry-after), up to the kind's max attempts;
//   - terminal error or attempts exhausted → a DLQ entry → <kind>_failed to
//     the aggregate (so it can compensate) → term;
//   - a command whose receipt already says done is acked without running
//     the handler (its result is re-sent, idempotently, if it was reported).
//
// Every delivery carries the command id as its idempotency key, its attempt
// number and the issuing aggregate version, so a receiver can fold repeats
// (package receiver) and fence stale workers. AckWait is a lease, not a
// fence: JetStream accepts a late ack from a worker that lost its lease.
//
// Targets: a Go [Handler], a NATS request ([NATSTarget]) or an HTTP POST
// ([HTTPTarget]).
package consumer

// Package consumer runs side effects: the workers that carry out the
// commands waiting in OUTBOX, exactly once in effect.
//
// One durable pull consumer per command kind and priority band
// (esjet-worker-<kind> on <ns>.outbox.<kind> for normal commands,
// esjet-band-high|low-<kind> on <ns>.outbox.<kind>.high|low) is shared by
// every node; each node runs a pool of workers per kind and pulls only as
// many messages as it has free workers, so no lease starts before its work
// does, sharing its pulls among the bands by weight (bands.go).
//
// Flow control held across the fleet in KV <ns>_workers (control.go): a
// paused kind pulls nothing (flow.go); a call waits for a slot of its
// concurrency key (keylimit.go), then its rate limit's token (rate.go),
// holding its lease and counting no attempt. While a handler runs, the worker
// keeps the lease alive with in-progress heartbeats; a handler past its
// deadline is cancelled through its context. In a pool of two or more a
// worker is free again when its call returns: the records that follow
// (receipt, report, ack) are written beside the pool (pull.go), so
// receipts waiting for a group commit round do not idle the pool.
//
// Outcomes:
//   - success → a receipt in KV <ns>_receipts (once per command id) → the
//     result back to the issuing aggregate as <kind>_done when the decision
//     asked for it (idempotency key <command id>/done, the same bytes on
//     every report) → ack (without waiting for the server once the
//     receipt is stored: the receipt folds a redelivery);
//   - retryable error → nak with exponential backoff and jitter (or the
//     handler's retry-after), up to the kind's max attempts;
//   - target unavailable (NATS no responders, HTTP connection refused) →
//     called again with backoff, holding the lease, for up to the kind's
//     timeout or AckWait, whichever is shorter; only then does the attempt
//     count as failed (and the command go back to the stream, where a node
//     with a working route may take it);
//   - stale (the receiver saw a newer attempt: receiver.ErrStale,
//     {"stale": true}, HTTP 412) → nothing: no ack, no nak, the newer
//     delivery finishes;
//   - terminal error or attempts exhausted → a DLQ entry → <kind>_failed to
//     the aggregate (so it can compensate) → term;
//   - a command whose receipt already says done is acked without running
//     the handler (its result is re-sent, idempotently, if it was reported).
//
// Every delivery carries the command id as its idempotency key, its attempt
// number, the issuing aggregate version and a fencing token (Esjet-Fence:
// the consumer's delivery sequence, higher for every delivery), so a
// receiver can fold repeats and refuse a stale worker (package receiver,
// DoFenced).
//
// AckWait is a lease, not a fence: JetStream accepts a late ack from a
// worker that lost its lease, and its in-progress acks are matched by
// stream sequence only, so the server cannot tell a worker whether it
// still holds a command. A worker keeps its own account on the monotonic
// clock (lease.go): right before each call it checks that less than
// AckWait has passed since its hold was last confirmed (a process stopped
// or paused for longer finds out here) and leaves the command alone if
// not — no call, no ack, no nak. A pause after that check is what the
// fence is for.
//
// The fence is as durable as the consumer's state. Deleting and recreating
// a kind's worker consumer restarts it at 1, and a server killed before it
// wrote its consumer state (R1 writes it ~10×/s) may hand out a delivery
// sequence again: a command in flight then may be refused as stale, is
// left alone, and comes back after AckWait with a higher fence (each
// delivery of any command raises it): delayed, not doubled. Two holders
// with an equal fence are folded by the receiver's claim on the key.
//
// Targets: a Go [Handler], a NATS request ([NATSTarget]) or an HTTP POST
// ([HTTPTarget]).
//
// The command message, its request headers, the receipt, the dead letter
// and the outcome are the OUTBOX contract (package wire): workers and the
// relay (package outbox) share it and never import each other.
//
// Data flow: OUTBOX (wire) → Worker → target; → KV <ns>_receipts, DLQ,
// <kind>_done/<kind>_failed as a wire.Report → the issuing aggregate
// (Feedback: internal/aggregate's, or at an edge hub internal/node's).
package consumer

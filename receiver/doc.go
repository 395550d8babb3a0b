// Package receiver makes the services that esjet calls idempotent: it folds
// repeated deliveries of one command into one effect.
//
// # Why
//
// esjet delivers every command at least once. A worker can time out while
// the service is still working, lose its lease and see another worker run
// the command too (JetStream accepts late acks), or crash after the effect
// and before the ack; an operator can re-drive a dead letter. Each delivery
// carries the command id as its Idempotency-Key, and the same id every
// time. The receiving service turns "at least once" into "exactly once in
// effect" by remembering, per key, what it already did.
//
// # How
//
// [Receiver.Do] keeps one record per key in a JetStream KV bucket:
//
//   - claim: kv.Create(key, {state: running, digest, owner, claimed_at}) —
//     atomic, so of two concurrent deliveries exactly one runs the effect;
//   - the effect runs, and the owner renews its claim every Lease/3;
//   - success: {state: done, digest, result, done_at} replaces the claim at
//     the claim's revision; every later delivery with the same parameters
//     gets that result (replayed) without running the effect;
//   - failure: the claim is deleted at its revision and the error returned
//     unchanged, so a retry runs the effect again — a failure consumes
//     nothing;
//   - a delivery that finds a fresh claim waits (a KV watch) for its
//     result; one that has seen a claim's revision unchanged for Lease (by
//     its own clock's elapsed time, never a server timestamp against the
//     local clock, so clock skew cannot break it) — its owner crashed —
//     takes it over with a revision-checked update (one taker wins) and
//     runs the effect.
//
// The digest is the SHA-256 of the parameters: the same key with different
// parameters is a client bug, reported as [ErrConflict].
//
// # Fences
//
// A worker stopped (SIGSTOP, a GC pause, a partition) after it checked its
// lease and before its call arrived calls late, possibly while the worker
// that replaced it is calling too. Each delivery carries a fencing token in
// the Esjet-Fence header ([HeaderFence]): a number that rises with every
// delivery of the command. [Receiver.DoFenced] keeps the highest fence seen
// in the key's record and refuses a lower one with [ErrStale], without
// running the effect and without waiting; an equal fence is the same
// attempt asking again. A failed attempt frees the key but keeps its fence
// (state released), so an older attempt arriving afterwards is still
// refused. Answer a refusal as {"error": …, "stale": true} (NATS) or 412
// Precondition Failed (HTTP): esjet's worker then leaves the command to
// the newer delivery.
//
// Keys are remembered for [Config].Retention after their last write. This
// must outlast the producer's longest retry — for esjet, how long a command
// may still be delivered or re-driven from the DLQ — or a very late
// delivery runs the effect a second time.
//
// The effect should itself be safe to repeat in the rare case the receiver
// cannot prevent: a crash after the effect and before the result is
// recorded, followed by a takeover after Lease. Where the downstream system
// accepts an idempotency key of its own, pass it the same key.
//
// # Example
//
//	rcv, err := receiver.New(ctx, js, receiver.Config{Bucket: "payments_receipts"})
//	if err != nil {
//		return err
//	}
//	_, err = nc.QueueSubscribe("payments.charge", "payments", func(m *nats.Msg) {
//		fence, _ := receiver.ParseFence(m.Header.Get(receiver.HeaderFence))
//		res, _, err := rcv.DoFenced(ctx, m.Header.Get("Idempotency-Key"), fence, m.Data, func(ctx context.Context) (json.RawMessage, error) {
//			return charge(ctx, m.Data) // runs once per key, in effect
//		})
//		reply(m, res, err) // {"result": …}, {"error": …, "retryable": …} or, for ErrStale, {"error": …, "stale": true}
//	})
//
// Under esjet's NATS roles (`esjet permissions`), a receiver's user lives in
// an account of its own, with JetStream for its bucket, and may subscribe to
// its subject and its own replies only: connect with
// nats.CustomInboxPrefix("_INBOX_<user>") so the bucket's reads come back.
package receiver

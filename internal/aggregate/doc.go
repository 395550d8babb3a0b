// Package aggregate is the Decide/Evolve contract and the repository that
// runs it.
//
// An aggregate type is two pure functions over its state S: Evolve(S, Event)
// S folds what happened, and one Decide function per command kind turns the
// state and a command into a [Decision] — the events that happened and the
// commands that must now be carried out — or a rejection. [Define] and [On]
// build a type-erased [*Definition] from them.
//
// The [Repository] handles a command end to end: load (LRU cache → snapshot
// in KV → tail of the aggregate subject), decide, append the decision as one
// message through internal/streams, fold it into the cached state. On a
// version conflict it reloads only the tail and decides again, a bounded
// number of times. Replay only evolves; it never dispatches: commands reach
// workers only through the relay, which reads what was recorded.
//
// Idempotency: a request's idempotency key determines its decision id, and
// the aggregate's recent decision ids (kept with the cached state and in
// snapshots, back to the configured horizon) answer a retry with the first
// result instead of deciding again (idempotency.go).
//
// Outcomes (outcome.go): <kind>_done and <kind>_failed reach an aggregate
// only through [Repository.HandleOutcome], the worker's path; [Repository.Handle]
// refuses them ([ErrOutcomeNotSendable]). The repository tracks the
// commands each aggregate issued with Report and still awaits (those whose
// outcomes the type registers), and lets an outcome through only for one
// of those. A worker reports through [Feedback] (feedback.go), which the
// node only wires in: the wire.Report becomes a [Request] here, and a
// permanent refusal a wire.ErrReportRefused.
//
// Errors are listed in errors.go; [IsPermanent] says which of them no retry
// will change, so a caller retrying on someone's behalf (the worker
// reporting an outcome) need not read a transport's status codes.
package aggregate

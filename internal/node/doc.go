// Package node wires one esjet node together and owns its life: the broker
// (embedded nats-server or an external cluster), the namespace's streams and
// buckets, the event log and the aggregate repository, the NATS micro and
// HTTP APIs, the outbox relay and the command workers. cmd/node (`esjet run`)
// and the public esjet package (and through it esjettest) start it.
//
// Start order: broker → create missing streams and buckets, check the rest → event log →
// repository → micro service → relay → workers (one per command kind with a
// target: a configured NATS or HTTP target, or a Go handler) → HTTP. A kind
// that a registered aggregate can issue (it handles the kind's outcome), or
// a raw type may issue (aggregates.raw.<type>.commands), but that no worker
// here carries out is logged at WARN when the node starts: its commands
// would wait in OUTBOX.
//
// Close stops everything under the caller's deadline, what takes work in
// first: HTTP and the micro service (in-flight requests finish), the
// workers (in-flight handlers finish, while in-process services still
// answer), the functions registered with OnClose (in-process services on
// the node's connection), the relay (its batch in hand), then the broker
// (drain, then the embedded server). Each wait is logged with what it is
// waiting for.
package node

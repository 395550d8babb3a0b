// Package projection builds read models from the event log: named handlers
// that follow every event of the namespace in global order (see
// wire.EventPosition) and keep views that queries read.
//
// Where it sits: EVENTS (<NS>_EVENTS) → an ordered consumer per projection
// partition, started from its checkpoint → the handler → the view's KV
// bucket <ns>_view_<name> (documents and checkpoint in one atomic batch) or
// the user's own store through a [Sink] (documents and position in one
// transaction). The api package serves the views' queries; the node runs a
// [Runner]; esjet projections (cmd/node) operates them through [Control].
//
// Guarantees:
//   - exactly once in effect: a view's documents and its checkpoint advance
//     together, so a crash, a restart or a repeat never applies an event
//     twice or skips one;
//   - one owner per projection partition at a time, by a lease in the
//     control bucket <ns>_projections; every write is fenced by the
//     checkpoint key's revision, and a new owner's first act is a write that
//     moves that revision, so a paused old owner that wakes up cannot write;
//   - filtered progress: a caught-up projection's checkpoint reaches the
//     log's end even when no recent event matched its filters;
//   - errors never skip silently: after bounded retries an event is parked
//     (with the later events of its aggregate, partitioned) or stops the
//     projection (single), until an operator retries or skips it; a skip
//     leaves a record.
package projection

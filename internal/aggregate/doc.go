// Package aggregate is the Decide/Evolve contract and the repository that
// runs it: load (cache → snapshot → tail of the aggregate subject), decide,
// append the decision through internal/streams, retry on conflict.
//
// Replay only evolves; it never dispatches. Commands reach workers only
// through the relay (internal/outbox), which reads what was recorded.
//
// Not built yet: see the issue "Aggregates and the command API".
package aggregate

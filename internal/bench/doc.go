// Package bench is `esjet bench`: how fast esjet is on this machine, each
// hot path measured beside raw JetStream doing the same work on the same
// server in the same run, so the ratio survives the noise of a shared
// machine when the absolute numbers do not.
//
// Run starts a node (in-process on a temporary directory, or connected to
// a cluster in a namespace of its own) and runs the phases one after
// another, one file each:
//
//	append   commands through the Go API       vs raw conditional appends (raw.Appender)
//	micro    commands through NATS micro (TCP)  vs the same appends from a TCP client
//	relay    the relay draining decisions       vs raw consume + publish + ack (raw.Relay)
//	effects  workers with a no-op handler       vs raw fetch + ack (raw.FetchAck)
//	e2e      command → relay → worker → outcome recorded (no raw pair), and
//	         where a step's time goes between its four writes' stored times (hops.go)
//	load     a cold load of a 1,000-event aggregate, without and with a snapshot,
//	         vs streams.Scanner reading its messages without decoding
//	replay   Log.ReadFrom of the whole log      vs a raw ordered consumer (raw.Read)
//
// How a phase pairs the two sides: the append, micro, e2e and load phases
// run closed-loop (or fixed-rate) operations with RunOps in interleaved
// rounds, rotating which side goes first (rounds.go); the drain phases
// (relay, effects, replay) fill a batch untimed, then time esjet and raw
// draining it, alternating which goes first (drain.go, raw.Pair). Either
// way both sides share the machine's noise, and the report's ratio (esjet
// ops/s ÷ raw ops/s) is the figure to compare between runs.
//
// The raw loops live in internal/bench/raw, which the packages' `go test
// -bench` benchmarks use too, so `esjet bench` and the benchmarks measure
// against one floor. Report renders the result as a table, JSON or SVG.
package bench

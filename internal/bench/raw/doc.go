// Package raw is the raw JetStream side of esjet's benchmarks: the plainest
// loops that do the same work as an esjet hot path, so a throughput figure
// can be set beside JetStream's own in the same run, and Pair, which times
// the two sides in alternating rounds.
//
// `esjet bench` (internal/bench) and the `go test -bench` benchmarks of
// internal/streams, internal/outbox, internal/consumer and the root package
// all measure against these loops, so the floor is one piece of code:
//
//	Appender       conditional appends, one subject per aggregate (streams.Log.Append)
//	GroupAppender  the same, through the plainest group commit of atomic batches
//	               (streams.Log.Append under group commit: its ceiling)
//	Relay          consume EVENTS, publish to OUTBOX, ack     (the outbox relay)
//	FetchAck       pull + ack of commands                     (the consumer workers)
//	Read           an ordered consumer over the log           (streams.Log.ReadFrom)
//
// The raw load (a batched direct get of one aggregate's subject) is
// streams.Scanner touching only the bytes: esjet's own reader is the floor.
//
// raw imports only nats.go: the benchmark tests of the packages it measures
// (which internal/bench imports) import it, so it must import none of them.
package raw

// Package esjettest starts an esjet node for tests in one line: an embedded
// nats-server in a temp directory on random loopback ports, with fsync by
// interval, closed when the test ends.
//
//	func TestBooking(t *testing.T) {
//		n := esjettest.Start(t, trip.Definition())
//		res, err := n.Send(t.Context(), "trip", "t1", "request_trip", req)
//		...
//	}
//
// The node is the whole of esjet (event log, relay, workers, NATS micro and
// HTTP APIs), the same [esjet.Start] a program calls; start from [Config] and
// pass it to [StartWith] to change a setting, such as workers' targets.
// Decide and Evolve are pure functions: test a domain's rules without a
// node, and use esjettest for what crosses the broker.
//
// Golden logs test that an old log still reads: [WriteLog] keeps a log an
// older shape of your events wrote, [StartWithLog] loads it into a node of
// today's definitions, [CheckStates] compares the states
// (docs/schema-evolution.md).
package esjettest

// Package natstest starts real nats-servers for tests: one embedded JetStream
// server ([RunServer]), or a three-node JetStream cluster in one process for
// the R3 cases ([RunCluster]). Nothing here mocks NATS; every helper registers
// its own cleanup with the test.
//
// It also holds the small helpers every package's tests share: [Connect] (a
// client and JetStream context closed with the test), [Namespace] (a
// namespace unique in the test binary, so parallel tests can share one
// server), [Eventually] (poll a condition instead of sleeping) and [Buffer]
// (a process's output read while it is still being written).
//
// It sits beside the data flow, not in it: production code never imports
// it. The e2e package runs the built binary instead, and esjettest is the
// public way to start a whole node in a test.
package natstest

// Package node wires one esjet node together: the broker (embedded
// nats-server or an external cluster), the namespace's streams and buckets,
// the event log, and the HTTP listener. cmd/node runs it; later the public
// esjet package and esjettest start it in-process.
//
// Start order: broker → provision → log → HTTP; Close stops them in reverse
// under the caller's deadline.
package node

// Package esjet is event sourcing on NATS JetStream: the small public face
// for Go services.
//
// Define an aggregate type with [Define] and [On] — pure Evolve and Decide
// functions over your state — register it with a node, and send it commands.
// A command's [Decision] (events + commands to carry out) is appended as one
// JetStream message on the aggregate's subject, guarded by optimistic
// concurrency; the commands then flow through the transactional outbox to
// workers.
//
// Package esjettest starts an embedded node for tests in one line.
package esjet

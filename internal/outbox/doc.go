// Package outbox carries the commands recorded in the event log to the
// OUTBOX stream, exactly once in effect: the relay, and nothing else.
//
// The log is the outbox table of the classic pattern: a command is pending
// from the moment its decision is stored. The [Relay] is a durable pull
// consumer on <NS>_EVENTS — one active per namespace, a pinned priority
// group, with failover when the pinned client stops pulling. For each
// decision it publishes every recorded command to <ns>.outbox.<kind> with
// Nats-Msg-Id = the command id (<type>:<id>:<version>:<index>), waits for
// OUTBOX's acks, then acks the decisions (the confirmation of those acks is
// awaited beside the next batch, confirm.go). A crash anywhere re-delivers the
// decisions; a decision that may have been relayed before is first looked
// up in OUTBOX, and only the commands OUTBOX does not hold are published
// (redelivery.go), so no copy is stored twice however late it comes back.
// A decision stored and delivered once while the relay runs reads nothing:
// a repeat there is inside OUTBOX's dedup window, which drops it.
//
// A command with a deliver-after time is published as a JetStream message
// schedule (@at) on <ns>.schedule.<kind>.<type>.<id>.<version>.<index>,
// targeting <ns>.outbox.<kind>: durable, fired once by the server.
//
// The message format is the OUTBOX contract's (package wire); the operator
// tools that check and repair what the relay did (reconcile, DLQ console,
// command inspector) are package ops.
//
// Data flow: internal/streams (EVENTS) → Relay → OUTBOX (wire) →
// internal/consumer.
package outbox

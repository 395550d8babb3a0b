// Package outbox carries the commands recorded in the event log to the
// OUTBOX stream: the relay (a durable consumer on <NS>_EVENTS, one active per
// namespace) publishes each command with Nats-Msg-Id = its deterministic
// command id, waits for the acks, then acks the decision. It also owns
// delayed commands, DLQ re-drive and reconciliation.
//
// Not built yet: see the issue "The transactional outbox".
package outbox

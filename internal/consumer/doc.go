// Package consumer runs side effects: durable pull workers on
// <ns>.outbox.<kind> with leases, backoff, dead letters, receipts and result
// feedback to the issuing aggregate. Every effect carries the command id as
// its idempotency key. It meets internal/outbox only on JetStream subjects.
//
// Not built yet: see the issue "Durable side-effect workers".
package consumer

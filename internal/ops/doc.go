// Package ops holds the operator tools of one namespace's outbox: the
// [Reconciler], the DLQ console ([DLQ]) and the command [Inspector]. They
// read what the relay (package outbox) and the workers (package consumer)
// left in JetStream, through the OUTBOX contract (package wire), and import
// neither.
//
//   - The [Reconciler] proves the exactly-once claim: it compares what the
//     log recorded with what OUTBOX, the receipts and the DLQ hold, per
//     kind, and can re-publish orphans with their original ids
//     ([Reconciler.Repair]). `esjet reconcile`.
//   - The [DLQ] lists, shows, re-drives and discards dead letters; every
//     retry or discard leaves an audit record first. `esjet dlq`.
//   - The [Inspector] answers where the relay is, what each kind of command
//     is doing (and whether any worker is pulling it), and where one
//     command is. `esjet outbox`.
//
// Everything here reads in batched direct gets (streams.Scanner); only
// Repair, Retry and Discard write.
//
// Data flow: EVENTS, OUTBOX, DLQ, KV <ns>_receipts → ops → cmd/node
// (esjet reconcile, dlq, outbox).
package ops

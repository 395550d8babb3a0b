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
//     retry or discard leaves an audit record, which settles the entry (the
//     DLQ denies delete and purge: settled entries stay). `esjet dlq`.
//   - The [Server] runs retry and discard in the node, asked on
//     esjet.<ns>.ops.<user>.dlq.<action> ([wire.ActionSubject]): the operator
//     role writes neither OUTBOX nor the DLQ, and its permissions allow it
//     only its own user token, which the audit record names.
//   - The [Inspector] answers where the relay is, what each kind of command
//     is doing (and whether any worker is pulling it), and where one
//     command is. `esjet outbox`.
//   - [RequireNamespace] refuses a namespace the server holds nothing of (a
//     mistyped --namespace), naming those it holds, before a command looks
//     its streams up one by one.
//
// Everything here reads in batched direct gets (streams.Scanner); only
// Repair, Retry and Discard write.
//
// Data flow: EVENTS, OUTBOX, DLQ, KV <ns>_receipts → ops → cmd/node
// (esjet reconcile, dlq, outbox); the node's API → [Server] → OUTBOX,
// receipts, DLQ audit records.
package ops

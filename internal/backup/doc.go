// Package backup owns esjet's backup archive of a namespace: what
// `esjet backup` writes and `esjet restore` reads. It sits beside the data
// flow, reading and writing the namespace's JetStream objects as an admin
// tool: the event log (<NS>_EVENTS), OUTBOX (with its pending schedules),
// the dead letters (<NS>_DLQ), and the buckets: snapshots, receipts, the
// projections' control bucket and every view.
//
// The archive is one gzip-compressed stream of JSON lines, readable with
// zcat and jq: a header (format, namespace, when, each object's
// configuration and the sequences it held when the backup began), then each
// object's messages (sequence, subject, headers, data) in stream order, then
// an end line with the counts, so a cut archive is refused (and what a
// restore created from it before it met the cut is deleted again). A backup taken
// during writes holds each object up to where it stood when the backup
// began, EVENTS first: every decision acknowledged before then, and the
// commands, receipts and views written before their own object was read.
//
// A restore recreates each object on a fresh server or cluster (under
// another namespace if asked, subjects and names rewritten) and publishes
// the messages in order. The event log, OUTBOX and the dead letters keep
// their sequences (a gap is filled with a message deleted at once), since
// positions, snapshots, read models and dead-letter ids refer to them;
// their stored times are the restore's. Consumers are not in the archive:
// the node creates them, the relay re-reads the log and finds its commands
// already in OUTBOX, and a worker that gets a command again finds its
// receipt.
package backup

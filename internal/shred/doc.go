// Package shred keeps personal data out of the log in plaintext
// (crypto-shredding): a personal field of an event, a command or a
// snapshot is stored sealed (AES-256-GCM) under a data key of its data
// subject (a traveler, a customer), and forgetting the subject destroys its
// keys, so every copy of the field — in EVENTS, OUTBOX, the DLQ,
// snapshots, an edge hub, a backup — is unreadable from then on.
//
// Where it sits: the repository seals what it appends and snapshots
// ([Sealer.SealJSON] with a [Spec] from the Go types' `esjet:"personal,…"`
// tags or the config's raw types), every read of the log opens what it
// finds ([Sealer.OpenJSON], wired as the log's first upcaster), workers
// open a command's payload just before its target sees it, and the node's
// API serves `esjet forget` ([Keyring.Forget]). The keys live in the
// namespace's bucket <ns>_keys (internal/wire), which only the node reads
// and writes.
package shred

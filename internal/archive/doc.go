// Package archive moves closed aggregates out of the event log.
//
// It sits beside the log (internal/streams → EVENTS): an aggregate whose
// type has a rule ([Rule]: closed by one of some event types, for some
// time) and whose commands were all relayed and settled is copied, message
// for message, into an archive object ([Object], in a [Store]: the
// namespace's object store <ns>_archive or a directory), read back and
// verified, then replaced in the log by a tombstone (wire.Tombstone: the
// state, the archive's name, what was archived) appended under the
// aggregate's expectation, and the messages before the tombstone are
// purged. Each step can be cut by a crash and the next run goes on from
// what it finds ([Archiver.Run]).
//
// Reads that need the history ([History]) fall through from a tombstone
// to its archive; everything that needs only the state (the repository,
// the relay, reconcile) reads the tombstone. docs/archiving.md is the
// user's guide; the object format is in format.go.
package archive

// Package streams is esjet's event log on JetStream: it provisions the streams
// and buckets of a namespace, appends decisions and reads them back. It is
// the log's I/O: the names and bytes it writes (the decision's types and
// headers, subjects, stream and bucket names, the token rule) are package
// wire's, and its own defaults are config.Default()'s.
//
// Provisioning has two sides. [Ensure] is a node's: it creates what is
// missing, each object with its whole configuration in one CREATE, and
// checks what exists (diff.go classifies each difference as lossy, needed or
// benign), because a node's role may not update a stream. [Provision] and
// [Apply] are esjet provision's, run as admin: create or update to the
// configuration.
//
// A decision (the events one command produced and the commands it issues) is
// appended as ONE message on the aggregate's literal subject
// <ns>.evt.<type>.<id>, guarded by Nats-Expected-Last-Subject-Sequence and
// identified by Nats-Msg-Id = the decision id. The log is therefore also the
// outbox: a command is pending from the moment its decision is stored.
//
// Every write to an aggregate subject carries an expectation. Ambiguous
// outcomes (a timed-out publish, 10071/10164 for a retry of an append that had
// committed, a duplicate ack on R3) are resolved by reading the aggregate's
// tail for the decision id, so a retried append returns the original result
// and stores nothing twice.
//
// Reads use batched direct get (no consumer per load). Upcasters registered
// in [Config] turn old event shapes into current ones on every read. A
// message on an aggregate subject that esjet did not write ([Foreign]: the
// stream denies deletes, so it stays for ever) is stepped over, logged once
// and counted; [Log.LoadTail] reports it with the subject's true last
// sequence, which the aggregate's next append expects.
//
// Data flow: aggregate repository → [Log.Append] → <NS>_EVENTS → relay
// (internal/outbox) → <NS>_OUTBOX → workers (internal/consumer).
package streams

package wire

// JetStream keeps a KV bucket in stream KV_<bucket> on subjects
// $KV.<bucket>.<key>, and an object store in stream OBJ_<bucket>.
const (
	KVStreamPrefix  = "KV_"
	ObjStreamPrefix = "OBJ_"
	kvSubjectPrefix = "$KV."
)

// KVStream is the stream of KV bucket bucket.
func KVStream(bucket string) string { return KVStreamPrefix + bucket }

// ObjSubjectRoot starts every object store's subjects: $O.<bucket>.…
const ObjSubjectRoot = "$O."

// ObjStream is the stream of object store bucket.
func ObjStream(bucket string) string { return ObjStreamPrefix + bucket }

// KVSubject is the subject of key in KV bucket bucket: a put publishes
// there, a direct get reads its last message.
func KVSubject(bucket, key string) string { return KVPrefix(bucket) + key }

// KVPrefix is what every key's subject of bucket starts with: $KV.<bucket>.
func KVPrefix(bucket string) string { return kvSubjectPrefix + bucket + "." }

// KVFilter is every key's subject of bucket: $KV.<bucket>.>.
func KVFilter(bucket string) string { return KVPrefix(bucket) + ">" }

// KVSubjectRoot starts the subject of every key of every bucket.
const KVSubjectRoot = kvSubjectPrefix

// A KV delete or purge is a marker message whose HeaderKVOperation says
// which (what jetstream.KeyValue.Delete and Purge write).
const (
	HeaderKVOperation = "KV-Operation"
	KVDeleteOp        = "DEL"
	KVPurgeOp         = "PURGE"
)

// IsKVDeleteOp reports whether op, a HeaderKVOperation value, marks the key
// deleted (a delete or a purge).
func IsKVDeleteOp(op string) bool { return op == KVDeleteOp || op == KVPurgeOp }

// Headers of a JetStream atomic batch (nats-server 2.12+, a stream with
// AllowAtomicPublish): every message carries the batch id and its sequence
// in the batch (1..n, no gaps), the last one the commit.
const (
	HeaderBatchID     = "Nats-Batch-Id"
	HeaderBatchSeq    = "Nats-Batch-Sequence"
	HeaderBatchCommit = "Nats-Batch-Commit" // "1" on the last message
)

// HeaderNumPending is on a batched direct get's replies: how many messages
// matching the request are left after this one.
const HeaderNumPending = "Nats-Num-Pending"

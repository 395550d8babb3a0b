package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// The workers' flow control lives in KV <ns>_workers (streams.Names.Workers),
// shared by every node serving a kind:
//
//	pause.<kind>                a kind's pause record ([PauseRecord]); the nodes watch pause.>
//	rate.<kind>                 a kind's rate limit: its token bucket, taken by compare-and-set
//	key.<kind>.<key>.<slot>     a call in flight for one concurrency key (slot 0..max-1),
//	                            created with a TTL, purged when the call is over ([KeyLeaseKey])
//	defer.<kind>.<command id>   how often workers that understand only an older schema
//	                            left a command for a newer worker ([DeferKey], [Deferral])
//	handback.<kind>.<command id>
//	                            how often stopping workers handed a command back unrun
//	                            ([HandBackKey], [HandBack])
//	archive.pass                the periodic archive pass: its lease and last result ([ArchivePassKey])

// PauseKey is the key of kind's pause record.
func PauseKey(kind string) string { return "pause." + kind }

// PauseWatch is the filter the nodes watch for pause records.
const PauseWatch = "pause.>"

// KindOfPauseKey is the kind a pause record's key names ("" if key is not one).
func KindOfPauseKey(key string) string {
	kind, ok := strings.CutPrefix(key, "pause.")
	if !ok || strings.Contains(kind, ".") {
		return ""
	}
	return kind
}

// RateKey is the key of kind's token bucket.
func RateKey(kind string) string { return "rate." + kind }

// PauseRecord is the value of a pause key: whether the kind is paused, who
// paused or resumed it, when and why.
type PauseRecord struct {
	Kind   string `json:"kind"`
	Paused bool   `json:"paused"`
	By     string `json:"by"`
	At     string `json:"at"` // RFC 3339, UTC
	Reason string `json:"reason,omitempty"`
}

// KeyLeaseKey is the key of slot (0..max-1) of concurrency key value of
// kind: key.<kind>.<value>.<slot>. A value made only of [A-Za-z0-9_-], at
// most 64 bytes, is written as it is (readable in `nats kv ls`); any other
// (dots, spaces, slashes, long) as "=" and the hex of the first 16 bytes
// of its SHA-256, which no value written as it is can equal.
func KeyLeaseKey(kind, value string, slot int) string {
	return KeyLeasePrefix(kind, value) + "." + strconv.Itoa(slot)
}

// KeyLeasePrefix is the keys of every slot of kind's concurrency key value,
// without the slot token: key.<kind>.<value>.
func KeyLeasePrefix(kind, value string) string {
	return "key." + kind + "." + keyToken(value)
}

// KeyLeaseWatch is the filter of every concurrency key lease of kind.
func KeyLeaseWatch(kind string) string { return "key." + kind + ".>" }

// KeyLeasePrefixOf is the prefix ([KeyLeasePrefix]) of a lease key ("" if
// key is not one).
func KeyLeasePrefixOf(key string) string {
	i := strings.LastIndexByte(key, '.')
	if i < 0 || !strings.HasPrefix(key, "key.") || strings.Count(key, ".") != 3 {
		return ""
	}
	return key[:i]
}

// KeyLeaseSubject is the subject a key of the workers' bucket is stored on
// ($KV.<bucket>.<key>): a lease is renewed by a publish there that expects
// its last revision and carries a new Nats-TTL, which kv.Update cannot.
func KeyLeaseSubject(bucket, key string) string { return "$KV." + bucket + "." + key }

// keyToken is value as one KV key token.
func keyToken(value string) string {
	if len(value) > 0 && len(value) <= 64 && strings.Trim(value, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == "" {
		return value
	}
	sum := sha256.Sum256([]byte(value))
	return "=" + hex.EncodeToString(sum[:16])
}

// KeyLease is the value of a concurrency key lease: who holds it.
type KeyLease struct {
	CommandID string `json:"command_id"`
	Node      string `json:"node"`
	At        string `json:"at"` // RFC 3339, UTC: when it was taken
}

// DeferKey is the key of command id's deferral record, kind being its kind:
// defer.<kind>.<id with ':' as '.'> (as [ReceiptKey]).
func DeferKey(kind, commandID string) string { return DeferPrefix(kind) + ReceiptKey(commandID) }

// DeferPrefix starts the deferral keys of kind: defer.<kind>.
func DeferPrefix(kind string) string { return "defer." + kind + "." }

// DeferWatch is the filter of every deferral record of every kind.
const DeferWatch = "defer.>"

// KindOfDeferKey is the kind a deferral key names ("" if key is not one).
func KindOfDeferKey(key string) string {
	rest, ok := strings.CutPrefix(key, "defer.")
	if !ok {
		return ""
	}
	kind, _, ok := strings.Cut(rest, ".")
	if !ok {
		return ""
	}
	return kind
}

// HandBackKey is the key of command id's hand-back record:
// handback.<kind>.<id with ':' as '.'> (as [ReceiptKey]).
func HandBackKey(kind, commandID string) string {
	return "handback." + kind + "." + ReceiptKey(commandID)
}

// HandBack is the value of a hand-back key: a command that workers held
// without running it — waiting for its rate limit's token, its concurrency
// key, a readable receipt, or an unavailable target — and gave back
// (nak) HandedBack times because they were stopping. Like a [Deferral] it
// is subtracted from the server's delivery count, so a fleet's restarts
// cost the command no attempts; removed when a worker finishes it.
type HandBack struct {
	CommandID  string `json:"command_id"`
	Kind       string `json:"kind"`
	HandedBack int    `json:"handed_back"` // deliveries given back unrun so far
	Node       string `json:"node"`        // the worker that gave it back last
	At         string `json:"at"`          // RFC 3339, UTC: the last hand-back
}

// Deferral is the value of a deferral key: a command of a schema newer than
// the workers that received it understood, left Deferred times for a
// worker that understands it. A delivery's attempt is the server's
// delivery count minus Deferred, so waiting costs no attempt. Removed when
// a worker that understands the command finishes it.
type Deferral struct {
	CommandID   string `json:"command_id"`
	Kind        string `json:"kind"`
	Schema      int    `json:"schema"`      // the command's schema version
	Deferred    int    `json:"deferred"`    // deliveries left alone so far
	Node        string `json:"node"`        // the worker that deferred it last
	Understands int    `json:"understands"` // the newest schema that worker understands
	At          string `json:"at"`          // RFC 3339, UTC: the last deferral
}

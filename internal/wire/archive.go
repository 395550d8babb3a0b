package wire

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/google/uuid"
)

// EventArchived is the one event of a tombstone: the decision esjet
// appends on an aggregate's subject when it moves the aggregate's earlier
// decisions to the archive (internal/archive). Its ':' is outside the
// token rule, so no domain code and no raw append can record it.
const EventArchived = "esjet:archived"

// HeaderArchived is on a tombstone: the archive object holding the
// decisions the tombstone replaced ([Tombstone].Archive). A reader that
// only looks at headers (nats stream view, the relay) knows it by this.
const HeaderArchived = "Esjet-Archived"

// ArchiveBucket is the object store holding namespace ns's archived
// aggregates (the default archive store): <ns>_archive.
func ArchiveBucket(ns string) string { return ns + "_archive" }

// ArchivePassKey is the key, in the workers' bucket (<ns>_workers), of
// the fleet's record of periodic archive passes (archive.every): which
// node runs one now (a lease renewed by compare-and-set) and what the
// last one did. internal/archive.PassRecord is its value.
const ArchivePassKey = "archive.pass"

// ArchiveObjectName is the archive object of aggregate typ/id whose
// decisions up to stream sequence lastSeq it holds: <type>.<id>.<lastSeq>.
// The name follows from what it holds, so an archive interrupted before
// its tombstone writes the same object again.
func ArchiveObjectName(typ, id string, lastSeq uint64) string {
	return typ + "." + id + "." + strconv.FormatUint(lastSeq, 10)
}

// Tombstone is the data of an [EventArchived] event: what remains of an
// archived aggregate in the log. It carries the aggregate's state, so a
// load never reads the archive, and the counts a reader accounts for
// without it (reconcile, rebuilds).
type Tombstone struct {
	// Archive is the archive object's name ([ArchiveObjectName]); Store
	// says where (an object store bucket or a directory, as configured).
	Archive string `json:"archive"`
	Store   string `json:"store,omitempty"`
	// FirstSeq and LastSeq are the stream sequences of the first and last
	// message archived; LastVersion the aggregate version of the last
	// event archived (the tombstone's own event is LastVersion+1).
	FirstSeq    uint64 `json:"first_seq"`
	LastSeq     uint64 `json:"last_seq"`
	LastVersion uint64 `json:"last_version"`
	// Decisions, Events and Bytes count what was archived (Bytes: the
	// messages' data and headers); Commands counts the commands those
	// decisions issued, per kind, all relayed and settled when archived.
	Decisions int            `json:"decisions"`
	Events    int            `json:"events"`
	Bytes     int64          `json:"bytes"`
	Commands  map[string]int `json:"commands,omitempty"`
	// SHA256 is the archive object's checksum (hex), as written and read
	// back before the tombstone was appended.
	SHA256 string `json:"sha256"`
	// State is the aggregate's state after its last archived event (the
	// type's snapshot JSON), and StateSchema its version; a command on
	// the archived aggregate folds on from it.
	State       json.RawMessage `json:"state,omitempty"`
	StateSchema int             `json:"state_schema,omitempty"`
	// ClosedBy is the closing event type the rule matched; Previous the
	// archive of an earlier tombstone this archive's first message was
	// (an aggregate restored and archived again), "" if none.
	ClosedBy string `json:"closed_by,omitempty"`
	Previous string `json:"previous,omitempty"`
}

// TombstoneID is the decision id (Nats-Msg-Id) of the tombstone that
// archives subject's messages up to lastSeq: derived, so a retried append
// is a duplicate rather than a second tombstone.
func TombstoneID(subject string, lastSeq uint64) string {
	return uuid.NewSHA1(tombstoneSpace, []byte(subject+"@"+strconv.FormatUint(lastSeq, 10))).String()
}

var tombstoneSpace = uuid.MustParse("8d1c2a4e-2f0b-4f5e-9d67-5a0e3b7c1f10")

// IsTombstone reports whether rec is a tombstone: one event, of type
// [EventArchived].
func IsTombstone(rec Record) bool {
	return len(rec.Events) == 1 && rec.Events[0].Type == EventArchived
}

// TombstoneOf decodes rec's tombstone; ok is false when rec is not one.
func TombstoneOf(rec Record) (Tombstone, bool, error) {
	if !IsTombstone(rec) {
		return Tombstone{}, false, nil
	}
	var t Tombstone
	if err := json.Unmarshal(rec.Events[0].Data, &t); err != nil {
		return Tombstone{}, true, fmt.Errorf("tombstone at seq %d: %w", rec.Seq, err)
	}
	return t, true, nil
}

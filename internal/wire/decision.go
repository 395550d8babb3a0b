package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// EnvelopeVersion is the version of the stored payload shape. A reader meets
// a newer version only after a downgrade and refuses it rather than guess.
const EnvelopeVersion = 1

// Headers of a decision message, so `nats stream view` shows what a message
// is without decoding the payload. The aggregate is the subject's last two
// tokens (<ns>.evt.<type>.<id>) and the decision id is Nats-Msg-Id, so
// nothing derivable is written twice: see streams.encode for which are always
// there and which only when they say something.
const (
	HeaderEnvelope      = "Esjet-Envelope"      // envelope version: marks a message esjet wrote
	HeaderEventTypes    = "Esjet-Event-Types"   // comma-separated, in order
	HeaderFirstVersion  = "Esjet-First-Version" // aggregate version of the first event, when not the last's
	HeaderLastVersion   = "Esjet-Last-Version"  // aggregate version of the last event
	HeaderCommandCount  = "Esjet-Command-Count" // commands recorded in the decision, when any
	HeaderCorrelationID = "Esjet-Correlation-Id"
	HeaderCausationID   = "Esjet-Causation-Id"
	HeaderTraceParent   = "traceparent" // W3C trace context (on decisions before issue 18; OUTBOX messages)

	// Written on decision messages before issue 18 (the subject says the
	// same); still the names of the OUTBOX headers that carry them.
	HeaderAggregateType = "Esjet-Aggregate-Type"
	HeaderAggregateID   = "Esjet-Aggregate-Id"
)

// Position is where an aggregate stands in the log: the stream sequence of
// its last message (0 = no message yet) and its aggregate version (the
// version of its last event). Append expects Seq; Version numbers new events.
type Position struct {
	Seq     uint64 `json:"seq"`
	Version uint64 `json:"version"`
}

// Decision is what handling one command produced, appended as one message.
type Decision struct {
	// ID is the decision id and the message's Nats-Msg-Id. Required: a UUID
	// derived from the request's idempotency key, or a UUIDv7.
	ID            string    `json:"id"`
	AggregateType string    `json:"aggregate_type"`
	AggregateID   string    `json:"aggregate_id"`
	Events        []Event   `json:"events"`
	Commands      []Command `json:"commands,omitempty"`
	CorrelationID string    `json:"correlation_id,omitempty"`
	CausationID   string    `json:"causation_id,omitempty"`
	TraceParent   string    `json:"traceparent,omitempty"`
	// IdempotencyKey is the client's key for the request that produced the
	// decision (the decision id is derived from it); RequestDigest is a hash
	// of that request, so a key reused with another request is recognised.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	RequestDigest  string `json:"request_digest,omitempty"`
}

// Event is one thing that happened to an aggregate.
type Event struct {
	// ID is derived from the decision id and the event's index when empty,
	// so a retried append produces the same ids.
	ID   string `json:"id"`
	Type string `json:"type"`
	// Schema is the version of Data's shape; 0 means 1. Upcasters see it.
	Schema int `json:"schema"`
	// StoredSchema is the version the log holds when a reader's upcasters
	// brought Data to Schema (0: as stored). Never written.
	StoredSchema int `json:"-"`
	// Version is the aggregate version, assigned by Append: expected+1, +2…
	Version uint64 `json:"version"`
	// Time is set by Append when zero.
	Time time.Time       `json:"time"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Decode unmarshals the event's data into v (nothing when there is none).
func (e Event) Decode(v any) error {
	if len(e.Data) == 0 {
		return nil
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("decode %s event v%d: %w", e.Type, e.Version, err)
	}
	return nil
}

// Command is an instruction the decision issues, carried out by a worker
// after the relay moves it to OUTBOX.
type Command struct {
	// ID is assigned by Append: <type>:<id>:<version>:<index>, version being
	// the decision's last event version. Deterministic: a retry yields the
	// same id, and OUTBOX deduplicates on it.
	ID      string          `json:"id"`
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// Report asks for the outcome to be sent back to the issuing aggregate.
	Report bool `json:"report,omitempty"`
	// DeliverAfter, when set, delays the command until that time.
	DeliverAfter time.Time `json:"deliver_after,omitzero"`
	// Priority is the command's band among its kind's: [PriorityHigh],
	// [PriorityLow], or empty (normal). Workers pull higher bands first,
	// by a weighted share that never starves a lower one.
	Priority string `json:"priority,omitempty"`
	// Schema is the version of Payload's shape; 0 means 1, and 1 is stored
	// as 0 (absent). Workers that understand only older versions of the
	// kind leave the command for a worker that understands it.
	Schema int `json:"schema,omitempty"`
}

// Command priorities ([Command].Priority). Empty is normal; "normal" is
// accepted and stored as empty, so a command without a priority and one
// with "normal" are the same command.
const (
	PriorityHigh   = "high"
	PriorityNormal = ""
	PriorityLow    = "low"
)

// ErrInvalidPriority is returned by [NormalPriority] for a priority that is
// none of them.
var ErrInvalidPriority = errors.New("wire: invalid priority")

// NormalPriority checks p and returns it as stored ("normal" → "").
func NormalPriority(p string) (string, error) {
	switch p {
	case PriorityHigh, PriorityLow, PriorityNormal:
		return p, nil
	case "normal":
		return PriorityNormal, nil
	}
	return "", fmt.Errorf("%w: %q: use high, normal (or nothing) or low", ErrInvalidPriority, p)
}

// Record is a decision as stored in the log.
type Record struct {
	Decision
	Seq     uint64    // stream sequence: the decision's global position
	Subject string    // the aggregate subject
	Stored  time.Time // server timestamp
	// Decided is its first event's time, set by the deciding node and kept
	// in the payload (zero when unknown); see [Record.DecidedAt].
	Decided time.Time
}

// DecidedAt is when the decision was made: the earlier of Decided (else
// the first event's time) and the time the stream stored it. A restore, or an edge hub sourcing a site, stores the message
// anew (Stored is then the copy's time); the events' time stays.
func (r Record) DecidedAt() time.Time {
	decided := r.Decided
	if decided.IsZero() && len(r.Events) > 0 {
		decided = r.Events[0].Time
	}
	if !decided.IsZero() && decided.Before(r.Stored) {
		return decided
	}
	return r.Stored
}

// FirstVersion is the aggregate version of the record's first event.
func (r Record) FirstVersion() uint64 { return r.Events[0].Version }

// LastVersion is the aggregate version of the record's last event.
func (r Record) LastVersion() uint64 { return r.Events[len(r.Events)-1].Version }

// Position is the aggregate's position right after this record.
func (r Record) Position() Position { return Position{Seq: r.Seq, Version: r.LastVersion()} }

// CommandID is the deterministic id of the index-th command of a decision
// whose last event has aggregate version version.
func CommandID(typ, id string, version uint64, index int) string {
	return typ + ":" + id + ":" + strconv.FormatUint(version, 10) + ":" + strconv.Itoa(index)
}

package wire

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// OutboxCommand is one OUTBOX command message as a worker reads it (a
// [Command] is the same command as its decision records it).
type OutboxCommand struct {
	ID            string
	Kind          string
	Payload       json.RawMessage
	AggregateType string
	AggregateID   string
	Version       uint64 // aggregate version of the issuing decision's last event
	DecisionID    string
	DecisionSeq   uint64 // EVENTS sequence of the issuing decision
	Report        bool   // report the outcome back to the aggregate
	DeliverAfter  time.Time
	Issued        time.Time // when the decision was stored
	CorrelationID string
	CausationID   string
	TraceParent   string
	Priority      string // high, low, or empty (normal)
	FenceBase     uint64 // added to the delivery sequence to make the fence (a re-drive's)
	// Schema is the version of Payload's shape ([Command].Schema): 1 when
	// the message has no [HeaderCommandSchema].
	Schema int
}

// EncodeCommand builds the OUTBOX message for command c of record rec: on
// <ns>.outbox.<kind> with Nats-Msg-Id = the command id. A command due later
// than now+1s becomes a JetStream message schedule (@at) on
// [ScheduleSubject], targeting the kind's subject: durable, fired once by
// the server. This is the relay's hot path.
func EncodeCommand(ns string, rec Record, c Command, now time.Time) *nats.Msg {
	target := BandSubject(ns, c.Kind, c.Priority)
	// Keys are assigned directly, not through Header.Set: they are already
	// in canonical form, and canonicalising 12 keys per command showed in
	// the relay's profile. Not written since issue 18, as nothing read
	// them: Content-Type, Esjet-Causation-Id (always the decision id, which
	// Esjet-Decision-Id holds: DecodeCommand fills it from there), and
	// Esjet-Report when false. Every header an older worker needs stays:
	// Esjet-Command-Id (beside the same Nats-Msg-Id), the kind, the issuing
	// aggregate and its version, the correlation id.
	h := make(nats.Header, 16)
	m := &nats.Msg{Subject: target, Header: h, Data: c.Payload}
	set := func(k, v string) { h[k] = []string{v} }
	set(jetstream.MsgIDHeader, c.ID)
	set(HeaderCommandID, c.ID)
	set(HeaderCommandKind, c.Kind)
	set(HeaderAggregateType, rec.AggregateType)
	set(HeaderAggregateID, rec.AggregateID)
	set(HeaderVersion, strconv.FormatUint(rec.LastVersion(), 10))
	set(HeaderDecisionID, rec.ID)
	set(HeaderDecisionSeq, strconv.FormatUint(rec.Seq, 10))
	if c.Report {
		set(HeaderReport, "true")
	}
	if c.Priority != "" {
		set(HeaderPriority, c.Priority)
	}
	if c.Schema > 1 {
		set(HeaderCommandSchema, strconv.Itoa(c.Schema))
	}
	if !rec.Stored.IsZero() {
		set(HeaderIssued, rec.Stored.UTC().Format(time.RFC3339Nano))
	}
	if rec.CorrelationID != "" {
		set(HeaderCorrelationID, rec.CorrelationID)
	}
	if rec.TraceParent != "" {
		set(HeaderTraceParent, rec.TraceParent)
	}
	if !c.DeliverAfter.IsZero() {
		set(HeaderDeliverAfter, c.DeliverAfter.UTC().Format(time.RFC3339Nano))
		if c.DeliverAfter.After(now.Add(time.Second)) {
			m.Subject = ScheduleSubject(ns, c.Kind, c.ID)
			// @at has second resolution: round up so it never fires early.
			at := c.DeliverAfter.UTC().Truncate(time.Second)
			if at.Before(c.DeliverAfter) {
				at = at.Add(time.Second)
			}
			set(HeaderSchedule, "@at "+at.Format(time.RFC3339))
			set(HeaderScheduleTarget, target)
		}
	}
	return m
}

// IsSchedule reports whether m (built by [EncodeCommand]) is a schedule.
func IsSchedule(m *nats.Msg) bool {
	_, ok := m.Header[HeaderSchedule]
	return ok
}

// DecodeCommand reads an OUTBOX command message. It returns an error
// wrapping [ErrNotACommand] when m has no command id, its payload is not
// JSON (a message some other producer put on an OUTBOX subject) or its
// schema header is not a whole number from 1 (esjet never writes one: no
// worker can tell whether it understands the payload). Other headers
// that do not parse (a version that is not a number, a time that is not
// RFC 3339) read as zero: they are informational, and a worker must still
// be able to run and dead-letter the command.
func DecodeCommand(m *nats.Msg) (OutboxCommand, error) {
	h := m.Header
	c := OutboxCommand{
		ID: h.Get(HeaderCommandID), Kind: h.Get(HeaderCommandKind), Payload: m.Data,
		AggregateType: h.Get(HeaderAggregateType), AggregateID: h.Get(HeaderAggregateID),
		DecisionID: h.Get(HeaderDecisionID), Report: h.Get(HeaderReport) == "true",
		CorrelationID: h.Get(HeaderCorrelationID), CausationID: h.Get(HeaderCausationID),
		TraceParent: h.Get(HeaderTraceParent), Priority: h.Get(HeaderPriority),
	}
	c.Version, _ = strconv.ParseUint(h.Get(HeaderVersion), 10, 64)
	c.FenceBase, _ = strconv.ParseUint(h.Get(HeaderFenceBase), 10, 64)
	c.DecisionSeq, _ = strconv.ParseUint(h.Get(HeaderDecisionSeq), 10, 64)
	if c.CausationID == "" {
		c.CausationID = c.DecisionID // not written since issue 18: it was always the decision id
	}
	c.DeliverAfter = parseTime(h.Get(HeaderDeliverAfter))
	c.Issued = parseTime(h.Get(HeaderIssued))
	c.Schema = 1
	if v := h.Get(HeaderCommandSchema); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, fmt.Errorf("%w: %s %q is not a schema version (1, 2, …)", ErrNotACommand, HeaderCommandSchema, v)
		}
		c.Schema = n
	}
	if c.ID == "" {
		return c, fmt.Errorf("%w: no %s header", ErrNotACommand, HeaderCommandID)
	}
	if len(c.Payload) > 0 && !json.Valid(c.Payload) {
		return c, fmt.Errorf("%w: the payload is not valid JSON", ErrNotACommand)
	}
	return c, nil
}

func parseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// RequestHeader is what a NATS or HTTP target receives with attempt number
// attempt of c, delivered with fencing token fence: the idempotency key (the
// command id), the attempt, the fence, and what identifies the command and
// its issuer, so a receiver can fold repeats and refuse a stale worker
// ([HeaderFence]).
func RequestHeader(c OutboxCommand, attempt int, fence uint64) map[string]string {
	h := map[string]string{
		HeaderIdempotencyKey: c.ID,
		HeaderAttempt:        strconv.Itoa(attempt),
		HeaderFence:          strconv.FormatUint(fence, 10),
		HeaderCommandID:      c.ID,
		HeaderCommandKind:    c.Kind,
		HeaderAggregateType:  c.AggregateType,
		HeaderAggregateID:    c.AggregateID,
		HeaderVersion:        strconv.FormatUint(c.Version, 10),
	}
	if c.CorrelationID != "" {
		h[HeaderCorrelationID] = c.CorrelationID
	}
	if c.Schema > 1 {
		h[HeaderCommandSchema] = strconv.Itoa(c.Schema)
	}
	if c.TraceParent != "" {
		// Lower case, as W3C writes it: NATS headers are case-sensitive
		// (HTTP canonicalizes it either way).
		h[HeaderTraceParent] = c.TraceParent
	}
	return h
}

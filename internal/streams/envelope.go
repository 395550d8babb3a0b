package streams

import (
	"crypto/sha1"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/esjet/esjet/internal/wire"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type envelope struct {
	V int `json:"v"`
	Decision
}

// prepare validates d and fills what Append assigns: event ids, versions and
// times, command ids. It never mutates the caller's slices. d's aggregate
// type and id are a validated aggregate's ([Log.build]).
func prepare(d Decision, after Position, now time.Time) (Decision, error) {
	decisionUUID, err := uuid.Parse(d.ID)
	if err != nil {
		return d, invalid("decision id %q is not a UUID: %v", d.ID, err)
	}
	if d.CorrelationID == "" {
		d.CorrelationID = d.ID // what a reader gets back: see appendEnvelope
	}
	if len(d.Events) == 0 {
		return d, invalid("a decision must record at least one event")
	}
	if len(d.Events) > wire.MaxEventsPerDecision {
		return d, invalid("a decision records %d events, more than %d (each event's global position is seq×%d+index): split it into several decisions",
			len(d.Events), wire.MaxEventsPerDecision, wire.PositionsPerDecision)
	}
	if after.Seq == 0 && after.Version != 0 {
		return d, invalid("expected position has version %d but no sequence", after.Version)
	}
	events := make([]Event, len(d.Events))
	for i, e := range d.Events {
		if err := wire.ValidateToken("event type", e.Type); err != nil {
			return d, err
		}
		if e.Schema < 0 {
			return d, invalid("event %d (%s): schema %d is negative", i, e.Type, e.Schema)
		}
		if e.Schema == 0 {
			e.Schema = 1
		}
		if len(e.Data) > 0 && !json.Valid(e.Data) {
			return d, invalid("event %d (%s): data is not valid JSON", i, e.Type)
		}
		if e.ID == "" {
			e.ID = eventID(decisionUUID, i)
		}
		e.Version = after.Version + uint64(i) + 1
		if e.Time.IsZero() {
			e.Time = now
		}
		e.Time = e.Time.UTC()
		events[i] = e
	}
	last := events[len(events)-1].Version
	cmds := make([]Command, len(d.Commands))
	for i, c := range d.Commands {
		if err := wire.ValidateToken("command kind", c.Kind); err != nil {
			return d, err
		}
		if len(c.Payload) > 0 && !json.Valid(c.Payload) {
			return d, invalid("command %d (%s): payload is not valid JSON", i, c.Kind)
		}
		c.ID = wire.CommandID(d.AggregateType, d.AggregateID, last, i)
		p, err := wire.NormalPriority(c.Priority)
		if err != nil {
			return d, invalid("command %d (%s): priority %q: use high, normal (or nothing) or low", i, c.Kind, c.Priority)
		}
		c.Priority = p
		switch {
		case c.Schema < 0:
			return d, invalid("command %d (%s): schema %d: use 1 or more (0 means 1)", i, c.Kind, c.Schema)
		case c.Schema == 1:
			c.Schema = 0 // stored as absent: the same bytes as before commands had versions
		}
		if !c.DeliverAfter.IsZero() {
			c.DeliverAfter = c.DeliverAfter.UTC()
		}
		cmds[i] = c
	}
	d.Events = events
	if len(cmds) == 0 {
		cmds = nil
	}
	d.Commands = cmds
	return d, nil
}

// encode builds the message for a prepared decision.
//
// What is always there: Nats-Msg-Id (the decision id), Esjet-Envelope,
// Esjet-Event-Types and Esjet-Last-Version (the append path reads the
// aggregate's position from it). Only when they say something: the first
// version (more than one event), the command count (any commands), the
// correlation id (not the decision's own id, the default), the causation
// id. Not written since issue 18, because the subject, another header or
// the envelope says it: Content-Type, Esjet-Aggregate-Type and -Id,
// traceparent (in the envelope; the relay puts it on each command's OUTBOX
// message). Messages written before still carry them; no reader used them.
func encode(subject string, d Decision) (*nats.Msg, error) {
	data, err := appendEnvelope(make([]byte, 0, 512+envelopeDataLen(d)), d)
	if err != nil {
		return nil, fmt.Errorf("encode decision %s: %w", d.ID, err)
	}
	h := make(nats.Header, 8)
	m := &nats.Msg{Subject: subject, Header: h, Data: data}
	set := func(k, v string) { h[k] = []string{v} }
	set(jetstream.MsgIDHeader, d.ID)
	set(wire.HeaderEnvelope, envelopeVersionText)
	if len(d.Events) == 1 {
		set(wire.HeaderEventTypes, d.Events[0].Type)
	} else {
		types := make([]string, len(d.Events))
		for i, e := range d.Events {
			types[i] = e.Type
		}
		set(wire.HeaderEventTypes, strings.Join(types, ","))
		set(wire.HeaderFirstVersion, strconv.FormatUint(d.Events[0].Version, 10))
	}
	set(wire.HeaderLastVersion, strconv.FormatUint(d.Events[len(d.Events)-1].Version, 10))
	if len(d.Commands) > 0 {
		set(wire.HeaderCommandCount, strconv.Itoa(len(d.Commands)))
	}
	if d.CorrelationID != "" && d.CorrelationID != d.ID {
		set(wire.HeaderCorrelationID, headerSafe(d.CorrelationID))
	}
	if d.CausationID != "" {
		set(wire.HeaderCausationID, headerSafe(d.CausationID))
	}
	return m, nil
}

var envelopeVersionText = strconv.Itoa(wire.EnvelopeVersion)

// headerSafe drops CR and LF: a header value must stay on one line.
func headerSafe(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return lineBreaks.Replace(s)
}

var lineBreaks = strings.NewReplacer("\r", "", "\n", "")

// msgSize is what the server counts against max_msg_size: headers + data.
func msgSize(m *nats.Msg) int {
	n := len(m.Data)
	for k, vs := range m.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4 // "k: v\r\n"
		}
	}
	return n + len("NATS/1.0\r\n\r\n")
}

// Decode parses a stored decision message. It checks the envelope version and
// the invariants Append guarantees (tokens, at least one event, contiguous
// versions), so a reader never folds a half-valid decision.
func Decode(data []byte) (Decision, error) {
	var env envelope
	if err := decodeEnvelope(data, &env); err != nil {
		return Decision{}, err
	}
	d := env.Decision
	if err := checkHead(env.V, &d); err != nil {
		return d, err
	}
	if len(d.Events) == 0 {
		return d, fmt.Errorf("envelope: no events")
	}
	for i, e := range d.Events {
		// A tombstone's one event is esjet's own ([wire.EventArchived]),
		// outside the token rule so that nothing else can record it.
		if e.Type == wire.EventArchived && len(d.Events) == 1 && len(d.Commands) == 0 {
			// ok
		} else if err := wire.ValidateToken("event type", e.Type); err != nil {
			return d, err
		}
		if e.Version == 0 || (i > 0 && e.Version != d.Events[i-1].Version+1) {
			return d, fmt.Errorf("envelope: event %d has version %d, not contiguous", i, e.Version)
		}
	}
	if err := checkCommands(&d); err != nil {
		return d, err
	}
	fillDerived(&d)
	return d, nil
}

// checkHead makes Decode's checks that come before the events': the
// envelope version, the decision id and the aggregate's tokens.
func checkHead(v int, d *Decision) error {
	if v > wire.EnvelopeVersion {
		return &EnvelopeError{Version: v}
	}
	if v != wire.EnvelopeVersion {
		return fmt.Errorf("envelope version %d is not supported (this build reads %d)", v, wire.EnvelopeVersion)
	}
	if d.ID == "" {
		return fmt.Errorf("envelope: missing decision id")
	}
	if err := wire.ValidateToken("aggregate type", d.AggregateType); err != nil {
		return err
	}
	return wire.ValidateToken("aggregate id", d.AggregateID)
}

// checkCommands makes Decode's check of the commands' kinds.
func checkCommands(d *Decision) error {
	for _, c := range d.Commands {
		if err := wire.ValidateToken("command kind", c.Kind); err != nil {
			return err
		}
	}
	return nil
}

// decodeRaw decodes a message read from the stream into a Record.
func decodeRaw(m *jetstream.RawStreamMsg) (Record, error) {
	d, err := Decode(m.Data)
	if ee := newerEnvelope(m, err); ee != nil {
		return Record{}, ee // not foreign: the aggregate's history goes on in it
	}
	return recordOf(m, d, err)
}

// recordOf is the Record of message m, whose data decoded to d (or failed
// with err): a DecodeError for a failure, or for an envelope that names
// another aggregate than the subject.
func recordOf(m *jetstream.RawStreamMsg, d Decision, err error) (Record, error) {
	if err != nil {
		return Record{}, &DecodeError{Seq: m.Sequence, Subject: m.Subject, Err: err}
	}
	if !wire.IsAggregateSubject(m.Subject, d.AggregateType, d.AggregateID) {
		return Record{}, &DecodeError{Seq: m.Sequence, Subject: m.Subject,
			Err: fmt.Errorf("envelope names aggregate %s/%s, not the subject's", d.AggregateType, d.AggregateID)}
	}
	rec := Record{Decision: d, Seq: m.Sequence, Subject: m.Subject, Stored: m.Time}
	if len(d.Events) > 0 {
		rec.Decided = d.Events[0].Time
	}
	return rec, nil
}

func envelopeDataLen(d Decision) int {
	n := 0
	for _, e := range d.Events {
		n += len(e.Data) + 200
	}
	for _, c := range d.Commands {
		n += len(c.Payload) + 150
	}
	return n
}

// appendEnvelope writes what json.Marshal(envelope{...}) writes, field for
// field, without reflection, but for two values a reader derives (see
// [Decode]): an event id that is the one prepare derives from the decision
// id and the event's index, and a correlation id that is the decision id.
// Leaving them out keeps the envelope version 1: an older reader takes an
// absent key as "" and reads everything else as before. The schema stays,
// though 1 would be derivable: an older build hands it to user upcasters.
// Raw JSON is embedded as given (prepare checked it).
func appendEnvelope(b []byte, d Decision) ([]byte, error) {
	var err error
	decisionUUID, derivable := parseUUID(d.ID)
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, wire.EnvelopeVersion, 10)
	b = appendField(b, "id", d.ID)
	b = appendField(b, "aggregate_type", d.AggregateType)
	b = appendField(b, "aggregate_id", d.AggregateID)
	b = append(b, `,"events":[`...)
	for i, e := range d.Events {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		if !derivable || e.ID != eventID(decisionUUID, i) {
			b = append(b, `"id":`...)
			b = appendString(b, e.ID)
			b = append(b, ',')
		}
		b = append(b, `"type":`...)
		b = appendString(b, e.Type)
		b = append(b, `,"schema":`...) // always: an older build's upcasters see it
		b = strconv.AppendInt(b, int64(e.Schema), 10)
		b = append(b, `,"version":`...)
		b = strconv.AppendUint(b, e.Version, 10)
		b = append(b, `,"time":`...)
		if b, err = appendTime(b, e.Time); err != nil {
			return nil, err
		}
		if len(e.Data) > 0 {
			b = append(b, `,"data":`...)
			b = append(b, e.Data...)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if len(d.Commands) > 0 {
		b = append(b, `,"commands":[`...)
		for i, c := range d.Commands {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendString(b, c.ID)
			b = appendField(b, "kind", c.Kind)
			if len(c.Payload) > 0 {
				b = append(b, `,"payload":`...)
				b = append(b, c.Payload...)
			}
			if c.Report {
				b = append(b, `,"report":true`...)
			}
			if !c.DeliverAfter.IsZero() {
				b = append(b, `,"deliver_after":`...)
				if b, err = appendTime(b, c.DeliverAfter); err != nil {
					return nil, err
				}
			}
			if c.Priority != "" {
				b = appendField(b, "priority", c.Priority)
			}
			if c.Schema > 1 {
				b = append(b, `,"schema":`...)
				b = strconv.AppendInt(b, int64(c.Schema), 10)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	correlation := d.CorrelationID
	if correlation == d.ID {
		correlation = ""
	}
	for _, f := range [...]struct{ k, v string }{
		{"correlation_id", correlation}, {"causation_id", d.CausationID}, {"traceparent", d.TraceParent},
		{"idempotency_key", d.IdempotencyKey}, {"request_digest", d.RequestDigest},
	} {
		if f.v != "" {
			b = appendField(b, f.k, f.v)
		}
	}
	return append(b, '}'), nil
}

// eventID is the id prepare gives the index-th event of a decision when the
// caller gave none.
func eventID(decision uuid.UUID, index int) string {
	// uuid.NewSHA1(decision, "event:<index>") without its allocations:
	// every decoded event derives its id.
	var buf [16 + len("event:") + 20]byte
	b := append(append(buf[:0], decision[:]...), "event:"...)
	b = strconv.AppendInt(b, int64(index), 10)
	sum := sha1.Sum(b)
	var u uuid.UUID
	copy(u[:], sum[:])
	u[6] = (u[6] & 0x0f) | 0x50 // version 5
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 4122 variant
	return u.String()
}

// parseUUID parses a decision id; ok is false when it is not a UUID (a
// decoded message may hold any string), and then no event id is derived.
func parseUUID(id string) (uuid.UUID, bool) {
	u, err := uuid.Parse(id)
	return u, err == nil
}

// fillDerived restores what appendEnvelope leaves out (and what an older
// writer may have left at its zero value): event ids derived from the
// decision id, schema 1, the decision id as correlation id.
func fillDerived(d *Decision) {
	var decisionUUID uuid.UUID
	derivable := false
	for i := range d.Events {
		e := &d.Events[i]
		if e.Schema == 0 {
			e.Schema = 1
		}
		if e.ID == "" {
			if i == 0 || !derivable {
				decisionUUID, derivable = parseUUID(d.ID)
			}
			if derivable {
				e.ID = eventID(decisionUUID, i)
			}
		}
	}
	if d.CorrelationID == "" {
		d.CorrelationID = d.ID
	}
}

func appendField(b []byte, key, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendString(b, v)
}

// appendString quotes s as JSON; plain ASCII (the common case: tokens,
// UUIDs) is copied, anything else goes through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func appendTime(b []byte, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y > 9999 {
		return nil, fmt.Errorf("time %v: year outside [0,9999]", t)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

package streams

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/wire"
)

var testNow = time.Date(2026, 3, 4, 5, 6, 7, 891234567, time.FixedZone("CET", 3600))

func sampleDecision() Decision {
	return Decision{
		ID:            "0190f4c2-7d3a-7c11-8a2b-3c4d5e6f7a8b",
		AggregateType: "trip",
		AggregateID:   "t-1",
		Events: []Event{
			{Type: "trip_requested", Data: json.RawMessage(`{"from":"AMS","to":"LIS"}`)},
			{Type: "budget_checked", Schema: 3, ID: "given-event-id", Time: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)},
		},
		Commands: []Command{
			{Kind: "book_flight", Payload: json.RawMessage(`{"seat":"12A"}`), Report: true},
			{Kind: "book_hotel", DeliverAfter: time.Date(2026, 5, 1, 12, 0, 0, 0, time.FixedZone("X", -7200)), Priority: PriorityHigh},
		},
		CorrelationID: "corr-1",
		CausationID:   "cause-1",
		TraceParent:   "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
}

func TestPrepareAssignsVersionsIDsTimesAndCommandIDs(t *testing.T) {
	t.Parallel()
	in := sampleDecision()
	orig := sampleDecision()
	after := Position{Seq: 17, Version: 4}
	p, err := prepare(in, after, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, orig) {
		t.Fatal("prepare mutated the caller's decision")
	}
	if v0, v1 := p.Events[0].Version, p.Events[1].Version; v0 != 5 || v1 != 6 {
		t.Fatalf("event versions = %d, %d; want 5, 6", v0, v1)
	}
	wantID := uuid.NewSHA1(uuid.MustParse(in.ID), []byte("event:0")).String()
	if p.Events[0].ID != wantID {
		t.Fatalf("derived event id = %q, want %q", p.Events[0].ID, wantID)
	}
	if p.Events[1].ID != "given-event-id" {
		t.Fatalf("a given event id was replaced: %q", p.Events[1].ID)
	}
	if p.Events[0].Schema != 1 || p.Events[1].Schema != 3 {
		t.Fatalf("schemas = %d, %d; want 1 (zero means 1), 3", p.Events[0].Schema, p.Events[1].Schema)
	}
	if !p.Events[0].Time.Equal(testNow) || p.Events[0].Time.Location() != time.UTC {
		t.Fatalf("empty event time = %v, want now in UTC", p.Events[0].Time)
	}
	if !p.Events[1].Time.Equal(orig.Events[1].Time) {
		t.Fatalf("a given event time was replaced: %v", p.Events[1].Time)
	}
	if p.Commands[0].ID != "trip:t-1:6:0" || p.Commands[1].ID != "trip:t-1:6:1" {
		t.Fatalf("command ids = %q, %q; want trip:t-1:6:0, trip:t-1:6:1", p.Commands[0].ID, p.Commands[1].ID)
	}
	if da := p.Commands[1].DeliverAfter; !da.Equal(orig.Commands[1].DeliverAfter) || da.Location() != time.UTC {
		t.Fatalf("deliver_after = %v, want the same instant in UTC", da)
	}

	// Deterministic: a retry of the same decision yields the same ids.
	again, err := prepare(sampleDecision(), after, testNow.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if again.Events[0].ID != p.Events[0].ID || again.Commands[1].ID != p.Commands[1].ID {
		t.Fatal("preparing the same decision twice gave different ids")
	}
	// A different index or decision id gives a different event id.
	two := sampleDecision()
	two.Events[1].ID = ""
	p2, err := prepare(two, after, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if p2.Events[1].ID == p2.Events[0].ID {
		t.Fatal("events 0 and 1 got the same derived id")
	}
	other := sampleDecision()
	other.ID = uuid.NewString()
	p3, err := prepare(other, after, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if p3.Events[0].ID == p.Events[0].ID {
		t.Fatal("two decisions got the same derived event id")
	}

	// No commands stay nil (omitted from the envelope).
	none := sampleDecision()
	none.Commands = []Command{}
	pn, err := prepare(none, Position{}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if pn.Commands != nil || pn.Events[0].Version != 1 {
		t.Fatalf("new aggregate without commands: commands %#v, first version %d", pn.Commands, pn.Events[0].Version)
	}
}

func TestPrepareRejectsInvalidDecisions(t *testing.T) {
	t.Parallel()
	mod := func(f func(*Decision)) Decision {
		d := sampleDecision()
		f(&d)
		return d
	}
	for _, tc := range []struct {
		name  string
		d     Decision
		after Position
		token bool // a *wire.TokenError rather than ErrInvalidDecision
	}{
		{"bad event type", mod(func(d *Decision) { d.Events[1].Type = "x>" }), Position{}, true},
		{"bad command kind", mod(func(d *Decision) { d.Commands[0].Kind = "*" }), Position{}, true},
		{"id not a uuid", mod(func(d *Decision) { d.ID = "decision-1" }), Position{}, false},
		{"missing id", mod(func(d *Decision) { d.ID = "" }), Position{}, false},
		{"no events", mod(func(d *Decision) { d.Events = nil }), Position{}, false},
		{"version without seq", sampleDecision(), Position{Version: 2}, false},
		{"negative schema", mod(func(d *Decision) { d.Events[0].Schema = -1 }), Position{}, false},
		{"invalid event data", mod(func(d *Decision) { d.Events[0].Data = json.RawMessage(`{"a":`) }), Position{}, false},
		{"invalid command payload", mod(func(d *Decision) { d.Commands[0].Payload = json.RawMessage(`nope`) }), Position{}, false},
		{"unknown priority", mod(func(d *Decision) { d.Commands[0].Priority = "urgent" }), Position{}, false},
	} {
		_, err := prepare(tc.d, tc.after, testNow)
		if tc.token {
			if !errors.Is(err, wire.ErrInvalidToken) {
				t.Errorf("%s: err = %v, want wire.ErrInvalidToken", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidDecision) {
			t.Errorf("%s: err = %v, want ErrInvalidDecision", tc.name, err)
		}
	}
}

func TestANormalPriorityIsStoredAsNone(t *testing.T) {
	t.Parallel()
	d := sampleDecision()
	d.Commands[0].Priority = "normal"
	p, err := prepare(d, Position{}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if p.Commands[0].Priority != PriorityNormal || p.Commands[1].Priority != PriorityHigh {
		t.Fatalf("priorities %q, %q; want none and high", p.Commands[0].Priority, p.Commands[1].Priority)
	}
	m, err := encode("ns.evt.trip.t-1", p)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(m.Data), `"priority"`); n != 1 {
		t.Fatalf("%d priority fields in %s; want only the high one's", n, m.Data)
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	p, err := prepare(sampleDecision(), Position{Seq: 9, Version: 2}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	m, err := encode("ns.evt.trip.t-1", p)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "ns.evt.trip.t-1" {
		t.Fatalf("subject = %q", m.Subject)
	}
	got, err := Decode(m.Data)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Fatalf("round trip changed the decision:\n got %+v\nwant %+v", got, p)
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(m.Data, &env); err != nil {
		t.Fatal(err)
	}
	if string(env["v"]) != "1" {
		t.Fatalf("envelope version field = %s, want 1", env["v"])
	}
}

func TestEncodeHeaders(t *testing.T) {
	t.Parallel()
	d := sampleDecision()
	d.CorrelationID = "corr\r\n-2"
	d.CausationID = "cause\n"
	p, err := prepare(d, Position{Seq: 9, Version: 2}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	m, err := encode("ns.evt.trip.t-1", p)
	if err != nil {
		t.Fatal(err)
	}
	// The aggregate is the subject's; Content-Type said nothing.
	want := map[string]string{
		jetstream.MsgIDHeader:    d.ID,
		wire.HeaderEnvelope:      "1",
		wire.HeaderEventTypes:    "trip_requested,budget_checked",
		wire.HeaderFirstVersion:  "3",
		wire.HeaderLastVersion:   "4",
		wire.HeaderCommandCount:  "2",
		wire.HeaderCorrelationID: "corr-2",
		wire.HeaderCausationID:   "cause",
	}
	for k, v := range want {
		if got := m.Header.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("header %s = %q, want exactly %q", k, got, v)
		}
	}
	if _, ok := m.Header[wire.HeaderTraceParent]; ok {
		t.Errorf("traceparent is a header too: the envelope holds it")
	}
	if len(m.Header) != len(want) {
		t.Errorf("encode set %d headers, want %d: %v", len(m.Header), len(want), m.Header)
	}

	// Optional ids are omitted rather than sent empty, the correlation id
	// when it is the decision's own, the first version for one event, the
	// command count for none.
	bare := sampleDecision()
	bare.CorrelationID, bare.CausationID, bare.TraceParent, bare.Commands = "", "", "", nil
	bare.Events = bare.Events[:1]
	p, err = prepare(bare, Position{}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	m, err = encode("ns.evt.trip.t-1", p)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{wire.HeaderCorrelationID, wire.HeaderCausationID, wire.HeaderTraceParent, wire.HeaderFirstVersion, wire.HeaderCommandCount} {
		if _, ok := m.Header[k]; ok {
			t.Errorf("header %s is set: %q", k, m.Header[k])
		}
	}
	if len(m.Header) != 4 || m.Header.Get(wire.HeaderLastVersion) != "1" || m.Header.Get(wire.HeaderEventTypes) != "trip_requested" {
		t.Errorf("a bare decision's headers = %v, want Nats-Msg-Id, Esjet-Envelope, Esjet-Event-Types, Esjet-Last-Version", m.Header)
	}
}

// validEnvelope returns the JSON of a valid stored decision as a map, to be
// broken one field at a time.
func validEnvelope(t *testing.T) map[string]any {
	t.Helper()
	p, err := prepare(sampleDecision(), Position{}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	m, err := encode("ns.evt.trip.t-1", p)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := json.Unmarshal(m.Data, &env); err != nil {
		t.Fatal(err)
	}
	return env
}

func TestDecodeRejectsBadEnvelopes(t *testing.T) {
	t.Parallel()
	events := func(env map[string]any) []any { return env["events"].([]any) }
	event := func(env map[string]any, i int) map[string]any { return events(env)[i].(map[string]any) }
	for _, tc := range []struct {
		name  string
		spoil func(env map[string]any)
		want  string
	}{
		{"version 0", func(env map[string]any) { env["v"] = 0 }, "envelope version 0 is not supported"},
		{"no version", func(env map[string]any) { delete(env, "v") }, "envelope version 0"},
		{"version 2", func(env map[string]any) { env["v"] = 2 }, "envelope version 2, newer than this node reads (1)"},
		{"version as string", func(env map[string]any) { env["v"] = "1" }, "envelope:"},
		{"missing id", func(env map[string]any) { delete(env, "id") }, "missing decision id"},
		{"empty id", func(env map[string]any) { env["id"] = "" }, "missing decision id"},
		{"no events", func(env map[string]any) { env["events"] = []any{} }, "no events"},
		{"null events", func(env map[string]any) { env["events"] = nil }, "no events"},
		{"first version 0", func(env map[string]any) { event(env, 0)["version"] = 0 }, "event 0 has version 0"},
		{"gap in versions", func(env map[string]any) { event(env, 1)["version"] = 3 }, "event 1 has version 3, not contiguous"},
		{"versions backwards", func(env map[string]any) {
			event(env, 0)["version"] = 5
			event(env, 1)["version"] = 4
		}, "event 1 has version 4"},
		{"negative version", func(env map[string]any) { event(env, 0)["version"] = -1 }, "envelope:"},
		{"bad aggregate type", func(env map[string]any) { env["aggregate_type"] = "a.b" }, "invalid aggregate type"},
		{"missing aggregate id", func(env map[string]any) { delete(env, "aggregate_id") }, "invalid aggregate id"},
		{"bad event type", func(env map[string]any) { event(env, 1)["type"] = "*" }, "invalid event type"},
		{"bad command kind", func(env map[string]any) {
			env["commands"].([]any)[0].(map[string]any)["kind"] = "with space"
		}, "invalid command kind"},
		{"bad time", func(env map[string]any) { event(env, 0)["time"] = "yesterday" }, "envelope:"},
	} {
		env := validEnvelope(t)
		tc.spoil(env)
		data, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Decode(data)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Decode err = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	for name, data := range map[string]string{
		"empty":     "",
		"truncated": `{"v":1,"id":"x","aggregate_type":"a","aggregate_id":"b","events":[{"type":"e","vers`,
		"array":     `[1,2]`,
		"null":      `null`,
		"trailing":  `{"v":1} x`,
	} {
		if _, err := Decode([]byte(data)); err == nil {
			t.Errorf("%s: Decode(%q) accepted it", name, data)
		}
	}
	// The unbroken envelope decodes: the cases above fail for their reason.
	data, _ := json.Marshal(validEnvelope(t))
	if _, err := Decode(data); err != nil {
		t.Fatalf("valid envelope: %v", err)
	}
}

func TestDecodeRawRejectsAForeignSubject(t *testing.T) {
	t.Parallel()
	p, err := prepare(sampleDecision(), Position{}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	m, err := encode("ns.evt.trip.t-1", p)
	if err != nil {
		t.Fatal(err)
	}
	raw := &jetstream.RawStreamMsg{Subject: "ns.evt.trip.t-2", Sequence: 7, Header: m.Header, Data: m.Data}
	_, err = decodeRaw(raw)
	var de *DecodeError
	if !errors.As(err, &de) || !errors.Is(err, ErrCorrupt) || de.Seq != 7 || !strings.Contains(err.Error(), "not the subject's") {
		t.Fatalf("decodeRaw of a decision on another aggregate's subject: %v", err)
	}
	raw.Subject = "ns.evt.trip.t-1"
	rec, err := decodeRaw(raw)
	if err != nil || rec.Seq != 7 || rec.Position() != (Position{Seq: 7, Version: 2}) {
		t.Fatalf("decodeRaw on its own subject: %+v, %v", rec, err)
	}
	// A future envelope is refused, not stepped over as corrupt (foreign):
	// the aggregate's history goes on in it.
	raw.Data = []byte(`{"v":9}`)
	if _, err := decodeRaw(raw); !errors.Is(err, ErrEnvelopeTooNew) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "seq 7 on ns.evt.trip.t-1") {
		t.Fatalf("decodeRaw of a future envelope: %v", err)
	}
}

func TestMsgSizeCountsHeadersAndData(t *testing.T) {
	t.Parallel()
	m := nats.NewMsg("s")
	m.Data = []byte("12345")
	if got := msgSize(m); got != 5+len("NATS/1.0\r\n\r\n") {
		t.Fatalf("msgSize without headers = %d", got)
	}
	m.Header.Set("K", "v")
	m.Header.Add("K", "vv")
	if got, want := msgSize(m), 5+len("NATS/1.0\r\n\r\n")+len("K: v\r\n")+len("K: vv\r\n"); got != want {
		t.Fatalf("msgSize = %d, want %d", got, want)
	}
}

// TestMsgSizeMatchesTheServersCount publishes one encoded decision, with the
// expectation header Append sends, to streams whose max_msg_size is
// msgSize and msgSize-1: the server must take the first and refuse the
// second, so msgSize is exactly what the server counts.
func TestMsgSizeMatchesTheServersCount(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ctx := t.Context()
	p, err := prepare(sampleDecision(), Position{Seq: 123456, Version: 2}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	build := func(subject string) *nats.Msg {
		m, err := encode(subject, p)
		if err != nil {
			t.Fatal(err)
		}
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
		return m
	}
	size := msgSize(build("a.x"))
	for _, tc := range []struct {
		name   string
		limit  int
		stored bool
	}{{"AT", size, true}, {"UNDER", size - 1, false}} {
		subject := strings.ToLower(tc.name) + ".x"
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
			Name: "SIZE_" + tc.name, Subjects: []string{subject}, MaxMsgSize: int32(tc.limit), Storage: jetstream.MemoryStorage,
		}); err != nil {
			t.Fatal(err)
		}
		_, err := js.PublishMsg(ctx, build(subject))
		if tc.stored && err != nil {
			t.Errorf("max_msg_size %d = msgSize: publish refused: %v", tc.limit, err)
		}
		if !tc.stored && !isTooLarge(err) {
			t.Errorf("max_msg_size %d = msgSize-1: publish err = %v, want 10054 (message size exceeds maximum)", tc.limit, err)
		}
	}
}

// TestAppendSizeLimitMatchesTheServer sweeps decisions across the limit on a
// stream whose max_msg_size equals the Log's MaxMessageSize: every append
// either succeeds or is refused by the client with a *SizeError; the server
// never refuses one the client let through.
func TestAppendSizeLimitMatchesTheServer(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ctx := t.Context()
	ns := natstest.Namespace(t)
	const limit = 4096
	if _, err := Provision(ctx, js, ns, ProvisionConfig{MaxMessageSize: limit}, nil); err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return testNow }
	l, err := Open(ctx, js, ns, Config{MaxMessageSize: limit, Now: clock}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(i, pad int) Decision {
		return Decision{
			ID:            uuid.NewString(),
			AggregateType: "blob",
			AggregateID:   fmt.Sprintf("b%04d", i),
			Events:        []Event{{Type: "stored", Data: json.RawMessage(`"` + strings.Repeat("x", pad) + `"`)}},
		}
	}
	// The encoded size grows byte for byte with the padding.
	p, err := prepare(mk(0, 0), Position{}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	m, err := encode("x", p)
	if err != nil {
		t.Fatal(err)
	}
	base := msgSize(m)
	var stored, refused int
	for i, pad := 0, limit-base-80; pad <= limit-base+5; i, pad = i+1, pad+1 {
		_, err := l.Append(ctx, mk(i, pad), Position{})
		var se *SizeError
		switch {
		case err == nil:
			if refused > 0 {
				t.Fatalf("padding %d stored after a smaller decision was refused", pad)
			}
			stored++
		case errors.As(err, &se):
			refused++
			if se.Limit != limit || se.Size <= limit {
				t.Fatalf("padding %d: SizeError %+v", pad, se)
			}
		default:
			t.Fatalf("padding %d (client-side size about %d of %d): %v; the client let through a message the server refused", pad, base+pad, limit, err)
		}
	}
	if stored == 0 || refused == 0 {
		t.Fatalf("the sweep did not cross the limit: %d stored, %d refused", stored, refused)
	}
}

package streams

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/wire"
)

// A decision exactly as esjet wrote it before issue 18 leaned the message:
// every header, every event id, schema and the correlation id in the
// envelope. Stored logs are full of these; they must read as they always did.
var (
	oldShapeHeaders = map[string]string{
		jetstream.MsgIDHeader:    "0190f4c2-7d3a-7c11-8a2b-3c4d5e6f7a8b",
		"Content-Type":           "application/json",
		wire.HeaderEnvelope:      "1",
		wire.HeaderAggregateType: "trip",
		wire.HeaderAggregateID:   "t-1",
		wire.HeaderEventTypes:    "trip_requested,budget_checked",
		wire.HeaderFirstVersion:  "1",
		wire.HeaderLastVersion:   "2",
		wire.HeaderCommandCount:  "1",
		wire.HeaderCorrelationID: "0190f4c2-7d3a-7c11-8a2b-3c4d5e6f7a8b",
		"Esjet-Causation-Id":     "cause-1",
		"traceparent":            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"Esjet-Unknown-Header":   "an older or newer writer's: ignored",
	}
	oldShapeBody = `{"v":1,"id":"0190f4c2-7d3a-7c11-8a2b-3c4d5e6f7a8b","aggregate_type":"trip","aggregate_id":"t-1",` +
		`"events":[{"id":"9a0dc4dd-973a-57dd-8331-3508c9eeb077","type":"trip_requested","schema":1,"version":1,"time":"2026-03-04T04:06:07.891234567Z","data":{"from":"AMS","to":"LIS"}},` +
		`{"id":"given-event-id","type":"budget_checked","schema":3,"version":2,"time":"2025-01-01T00:00:00Z"}],` +
		`"commands":[{"id":"trip:t-1:2:0","kind":"book_flight","payload":{"seat":"12A"},"report":true}],` +
		`"correlation_id":"0190f4c2-7d3a-7c11-8a2b-3c4d5e6f7a8b","causation_id":"cause-1","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`
)

// oldShapeDecision is what oldShapeBody holds.
func oldShapeDecision() Decision {
	id := "0190f4c2-7d3a-7c11-8a2b-3c4d5e6f7a8b"
	return Decision{
		ID: id, AggregateType: "trip", AggregateID: "t-1",
		Events: []Event{
			{ID: "9a0dc4dd-973a-57dd-8331-3508c9eeb077", Type: "trip_requested", Schema: 1, Version: 1,
				Time: time.Date(2026, 3, 4, 4, 6, 7, 891234567, time.UTC), Data: json.RawMessage(`{"from":"AMS","to":"LIS"}`)},
			{ID: "given-event-id", Type: "budget_checked", Schema: 3, Version: 2, Time: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)},
		},
		Commands:      []Command{{ID: "trip:t-1:2:0", Kind: "book_flight", Payload: json.RawMessage(`{"seat":"12A"}`), Report: true}},
		CorrelationID: id, CausationID: "cause-1", TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
}

func TestDecodeReadsTheShapeWrittenBeforeIssue18(t *testing.T) {
	t.Parallel()
	got, err := Decode([]byte(oldShapeBody))
	if err != nil {
		t.Fatal(err)
	}
	if want := oldShapeDecision(); !reflect.DeepEqual(got, want) {
		t.Fatalf("old shape decoded as\n%+v\nwant\n%+v", got, want)
	}
	// The same decision written today is the same decision read back.
	m, err := encode("ns.evt.trip.t-1", got)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Decode(m.Data)
	if err != nil || !reflect.DeepEqual(again, got) {
		t.Fatalf("lean re-encoding reads back as %+v (%v), want %+v", again, err, got)
	}
	if len(m.Data) >= len(oldShapeBody) {
		t.Fatalf("lean envelope is %d bytes, the old one %d", len(m.Data), len(oldShapeBody))
	}
	// An old decision without a correlation id (appended below the
	// aggregate layer, which always set one) reads with its own id as
	// correlation id, as one appended today does; and schema 0 means 1.
	var env map[string]any
	_ = json.Unmarshal([]byte(oldShapeBody), &env)
	delete(env, "correlation_id")
	env["events"].([]any)[0].(map[string]any)["schema"] = 0
	b, _ := json.Marshal(env)
	d, err := Decode(b)
	if err != nil || d.CorrelationID != d.ID || d.Events[0].Schema != 1 {
		t.Fatalf("without correlation id and with schema 0: %+v, %v", d, err)
	}
}

// TestOlderReadersReadTheLeanEnvelope pins the rolling upgrade: a node of an
// older build (its decoder reads what encoding/json reads, see
// FuzzDecoderMatchesEncodingJSON) reads a decision written by this one —
// the same envelope version, every command id its relay publishes — and
// sees only the values left out as empty: event ids it can derive, the
// correlation id that is the decision's own. The schema is always written:
// user upcasters of an older build get it.
func TestOlderReadersReadTheLeanEnvelope(t *testing.T) {
	t.Parallel()
	want := oldShapeDecision()
	m, err := encode("ns.evt.trip.t-1", want)
	if err != nil {
		t.Fatal(err)
	}
	var old envelope
	if err := json.Unmarshal(m.Data, &old); err != nil {
		t.Fatal(err)
	}
	if old.V != 1 {
		t.Fatalf("envelope version %d: an older build refuses anything but 1", old.V)
	}
	want.Events[0].ID, want.CorrelationID = "", ""
	if !reflect.DeepEqual(old.Decision, want) {
		t.Fatalf("an older reader sees\n%+v\nwant\n%+v", old.Decision, want)
	}
}

// TestLogReadsAndExtendsAnAggregateWrittenInTheOldShape stores the old
// shape on a real server and reads it through the log: load, position, and
// an append after it.
func TestLogReadsAndExtendsAnAggregateWrittenInTheOldShape(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	ctx := t.Context()
	if _, err := Provision(ctx, js, ns, ProvisionConfig{Replicas: 1}, nil); err != nil {
		t.Fatal(err)
	}
	l, err := Open(ctx, js, ns, Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := &nats.Msg{Subject: ns + ".evt.trip.t-1", Header: nats.Header{}, Data: []byte(oldShapeBody)}
	for k, v := range oldShapeHeaders {
		m.Header.Set(k, v)
	}
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := l.Load(ctx, "trip", "t-1", Position{})
	if err != nil || len(recs) != 1 {
		t.Fatalf("load = %d records, %v", len(recs), err)
	}
	if want := oldShapeDecision(); !reflect.DeepEqual(recs[0].Decision, want) {
		t.Fatalf("loaded %+v\nwant %+v", recs[0].Decision, want)
	}
	pos, err := l.Last(ctx, aggRef("trip", "t-1"))
	if err != nil || pos != (Position{Seq: ack.Sequence, Version: 2}) {
		t.Fatalf("last = %+v, %v; want seq %d version 2", pos, err, ack.Sequence)
	}
	rec, err := l.Append(ctx, Decision{ID: "0190f4c2-7d3a-7c11-8a2b-3c4d5e6f7a8c", AggregateType: "trip", AggregateID: "t-1",
		Events: []Event{{Type: "trip_confirmed"}}}, pos)
	if err != nil || rec.LastVersion() != 3 {
		t.Fatalf("append after the old decision: version %d, %v", rec.LastVersion(), err)
	}
	if recs, err = l.Load(ctx, "trip", "t-1", Position{}); err != nil || len(recs) != 2 || recs[1].Events[0].ID != rec.Events[0].ID {
		t.Fatalf("reload: %+v, %v", recs, err)
	}
}

package wire

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func testRecord() Record {
	return Record{
		Decision: Decision{
			ID: "0190f0a4-0000-7000-8000-000000000001", AggregateType: "trip", AggregateID: "t1",
			Events:        []Event{{Type: "a", Version: 3}, {Type: "b", Version: 4}},
			CorrelationID: "corr-1", TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		},
		Seq: 42, Subject: "ns.evt.trip.t1", Stored: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
	}
}

func TestEncodeDecodeCommandRoundTrips(t *testing.T) {
	t.Parallel()
	rec := testRecord()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []Command{
		{ID: "trip:t1:4:0", Kind: "book_flight", Payload: json.RawMessage(`{"to":"LIS"}`), Report: true},
		{ID: "trip:t1:4:1", Kind: "notify", Payload: nil},
		{ID: "trip:t1:4:2", Kind: "remind", Payload: json.RawMessage(`1`), DeliverAfter: now.Add(500 * time.Millisecond)},
		{ID: "trip:t1:4:3", Kind: "book_flight", Payload: json.RawMessage(`{"to":"LIS"}`), Schema: 2},
	} {
		m := EncodeCommand("ns", rec, c, now)
		if m.Subject != "ns.outbox."+c.Kind || m.Header.Get(jetstream.MsgIDHeader) != c.ID || IsSchedule(m) {
			t.Fatalf("%s: subject %q msg id %q", c.ID, m.Subject, m.Header.Get(jetstream.MsgIDHeader))
		}
		got, err := DecodeCommand(m)
		if err != nil {
			t.Fatal(err)
		}
		want := OutboxCommand{
			ID: c.ID, Kind: c.Kind, Payload: c.Payload, AggregateType: "trip", AggregateID: "t1", Version: 4,
			DecisionID: rec.ID, DecisionSeq: 42, Report: c.Report, DeliverAfter: c.DeliverAfter, Issued: rec.Stored,
			CorrelationID: "corr-1", CausationID: rec.ID, TraceParent: rec.TraceParent, Schema: max(c.Schema, 1),
		}
		if (c.Schema > 1) != (m.Header.Get(HeaderCommandSchema) != "") {
			t.Errorf("%s: schema %d, header %q: written only above 1", c.ID, c.Schema, m.Header.Get(HeaderCommandSchema))
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
		}
	}
}

func TestEncodeCommandDueLaterIsAScheduleThatNeverFiresEarly(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := Command{ID: "trip:t1:4:0", Kind: "remind", DeliverAfter: now.Add(90*time.Second + time.Millisecond)}
	m := EncodeCommand("ns", testRecord(), c, now)
	if !IsSchedule(m) || m.Subject != "ns.schedule.remind.trip.t1.4.0" {
		t.Fatalf("subject %q, schedule %v", m.Subject, IsSchedule(m))
	}
	if got := m.Header.Get(HeaderSchedule); got != "@at 2026-01-02T03:05:36Z" {
		t.Fatalf("schedule %q: want the deliver-after time rounded up to the second", got)
	}
	if m.Header.Get(HeaderScheduleTarget) != "ns.outbox.remind" || KindOfSchedule("ns", m.Subject) != "remind" {
		t.Fatalf("target %q", m.Header.Get(HeaderScheduleTarget))
	}
	if !strings.HasSuffix(ScheduleFilterFor("ns", c.ID), ".trip.t1.4.0") {
		t.Fatal(ScheduleFilterFor("ns", c.ID))
	}
}

func TestDecodeCommandRefusesAMessageThatIsNotACommand(t *testing.T) {
	t.Parallel()
	for name, m := range map[string]*nats.Msg{
		"no id":       {Subject: "ns.outbox.k", Header: nats.Header{}, Data: []byte(`{}`)},
		"not json":    {Subject: "ns.outbox.k", Header: nats.Header{HeaderCommandID: {"a:b:1:0"}}, Data: []byte("hello")},
		"nil headers": {Subject: "ns.outbox.k", Data: []byte(`{}`)},
	} {
		if _, err := DecodeCommand(m); !errors.Is(err, ErrNotACommand) {
			t.Errorf("%s: %v, want ErrNotACommand", name, err)
		}
	}
}

func TestRequestHeaderCarriesTheKeyAttemptFenceAndIssuer(t *testing.T) {
	t.Parallel()
	m := EncodeCommand("ns", testRecord(), Command{ID: "trip:t1:4:0", Kind: "k"}, time.Now())
	c, err := DecodeCommand(m)
	if err != nil {
		t.Fatal(err)
	}
	h := RequestHeader(c, 3, 17)
	for k, v := range map[string]string{HeaderIdempotencyKey: "trip:t1:4:0", HeaderAttempt: "3", HeaderFence: "17", HeaderVersion: "4",
		HeaderAggregateID: "t1", HeaderCorrelationID: "corr-1", HeaderTraceParent: testRecord().TraceParent} {
		if h[k] != v {
			t.Errorf("%s = %q, want %q", k, h[k], v)
		}
	}
}

// FuzzDecodeCommand: whatever an OUTBOX message holds, decoding never
// panics, and a message it accepts re-encodes to one that decodes the same.
func FuzzDecodeCommand(f *testing.F) {
	f.Add("trip:t1:4:0", "book_flight", "trip", "t1", "4", "42", "true", "2026-01-02T03:04:05Z", []byte(`{"a":1}`))
	f.Add("", "k", "", "", "x", "-1", "yes", "not a time", []byte("hello"))
	f.Add("a:b:1:0", "", "a", "b", "18446744073709551616", "", "", "", []byte(nil))
	f.Fuzz(func(t *testing.T, id, kind, typ, aggID, version, seq, report, deliverAfter string, payload []byte) {
		h := nats.Header{}
		for k, v := range map[string]string{HeaderCommandID: id, HeaderCommandKind: kind, HeaderAggregateType: typ,
			HeaderAggregateID: aggID, HeaderVersion: version, HeaderDecisionSeq: seq, HeaderReport: report,
			HeaderDeliverAfter: deliverAfter} {
			if v != "" {
				h[k] = []string{v}
			}
		}
		c, err := DecodeCommand(&nats.Msg{Subject: "ns.outbox.k", Header: h, Data: payload})
		if err != nil {
			if !errors.Is(err, ErrNotACommand) {
				t.Fatalf("error %v does not wrap ErrNotACommand", err)
			}
			return
		}
		if c.ID != id || string(c.Payload) != string(payload) || c.Report != (report == "true") {
			t.Fatalf("decoded %+v from id %q report %q", c, id, report)
		}
		if c.Version == 0 {
			return // a decision always has a last event: nothing to re-encode
		}
		rec := Record{Decision: Decision{ID: c.DecisionID, AggregateType: c.AggregateType, AggregateID: c.AggregateID,
			Events: []Event{{Version: c.Version}}}, Seq: c.DecisionSeq}
		again, err := DecodeCommand(EncodeCommand("ns", rec, Command{ID: c.ID, Kind: c.Kind, Payload: c.Payload,
			Report: c.Report, DeliverAfter: c.DeliverAfter}, c.DeliverAfter))
		if err != nil {
			t.Fatal(err)
		}
		if again.ID != c.ID || again.Version != c.Version || again.DecisionSeq != c.DecisionSeq || !again.DeliverAfter.Equal(c.DeliverAfter) {
			t.Fatalf("re-encoded %+v, want %+v", again, c)
		}
	})
}

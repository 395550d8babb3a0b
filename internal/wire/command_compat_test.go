package wire

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// An OUTBOX command message exactly as a relay wrote it before issue 18:
// OUTBOX keeps days of them, and a worker must run them as it always did.
func TestDecodeCommandReadsTheShapeWrittenBeforeIssue18(t *testing.T) {
	t.Parallel()
	m := &nats.Msg{Subject: "ns.outbox.notify", Data: []byte(`{"to":"ada"}`), Header: nats.Header{
		jetstream.MsgIDHeader: {"trip:t1:4:1"}, "Content-Type": {"application/json"},
		HeaderCommandID: {"trip:t1:4:1"}, HeaderCommandKind: {"notify"},
		HeaderAggregateType: {"trip"}, HeaderAggregateID: {"t1"}, HeaderVersion: {"4"},
		HeaderDecisionID: {"0190f0a4-0000-7000-8000-000000000001"}, HeaderDecisionSeq: {"42"},
		HeaderReport: {"false"}, HeaderCausationID: {"0190f0a4-0000-7000-8000-000000000001"},
		HeaderIssued: {"2026-01-02T03:04:05.000000006Z"}, HeaderCorrelationID: {"corr-1"},
		HeaderTraceParent: {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
	}}
	got, err := DecodeCommand(m)
	if err != nil {
		t.Fatal(err)
	}
	rec := testRecord()
	want := OutboxCommand{ID: "trip:t1:4:1", Kind: "notify", Payload: json.RawMessage(`{"to":"ada"}`), AggregateType: "trip", AggregateID: "t1",
		Version: 4, DecisionID: rec.ID, DecisionSeq: 42, Issued: rec.Stored, CorrelationID: "corr-1", CausationID: rec.ID, TraceParent: rec.TraceParent, Schema: 1}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("old shape:\n got %+v\nwant %+v", got, want)
	}
	// And what a relay writes now decodes to the same command.
	now := EncodeCommand("ns", rec, Command{ID: "trip:t1:4:1", Kind: "notify", Payload: json.RawMessage(`{"to":"ada"}`)}, rec.Stored)
	if again, err := DecodeCommand(now); err != nil || !reflect.DeepEqual(again, want) {
		t.Fatalf("new shape: %+v, %v", again, err)
	}
	if size(now) >= size(m) {
		t.Fatalf("new headers %d bytes, old %d", size(now), size(m))
	}
}

// TestOlderWorkersReadTheLeanCommand pins the rolling upgrade: every header
// an older worker reads to run a command, report its outcome and call a
// target is still written, with the value it always had.
func TestOlderWorkersReadTheLeanCommand(t *testing.T) {
	t.Parallel()
	rec := testRecord()
	m := EncodeCommand("ns", rec, Command{ID: "trip:t1:4:0", Kind: "book_flight", Report: true}, rec.Stored)
	for k, v := range map[string]string{
		jetstream.MsgIDHeader: "trip:t1:4:0", HeaderCommandID: "trip:t1:4:0", HeaderCommandKind: "book_flight",
		HeaderAggregateType: "trip", HeaderAggregateID: "t1", HeaderVersion: "4", HeaderDecisionID: rec.ID,
		HeaderDecisionSeq: "42", HeaderReport: "true", HeaderCorrelationID: "corr-1", HeaderTraceParent: rec.TraceParent,
		HeaderIssued: "2026-01-02T03:04:05.000000006Z",
	} {
		if got := m.Header.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	for _, k := range []string{"Content-Type", HeaderCausationID} {
		if _, ok := m.Header[k]; ok {
			t.Errorf("header %s is written: it says nothing new", k)
		}
	}
}

func size(m *nats.Msg) int {
	n := 0
	for k, vs := range m.Header {
		for _, v := range vs {
			n += len(k) + len(v) + len(": \r\n")
		}
	}
	return n
}

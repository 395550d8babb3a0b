package wire

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestDeadLetterMsgTakesTheKindFromTheSubjectAndCapsTheError(t *testing.T) {
	t.Parallel()
	in := &nats.Msg{Subject: "ns.outbox.pay", Header: nats.Header{
		jetstream.MsgIDHeader: {"x:1"}, "Nats-Schedule-Next": {"purge"}, "Esjet-Custom": {"kept"},
	}, Data: []byte("not json")}
	m := DeadLetterMsg("ns", in, 9, strings.Repeat("é", 2000), 1, "w", time.Now())
	if m.Subject != "ns.dlq.pay" || m.Header.Get(jetstream.MsgIDHeader) != "dlq:x:1:9" {
		t.Fatalf("subject %q msg id %q", m.Subject, m.Header.Get(jetstream.MsgIDHeader))
	}
	if m.Header.Get("Nats-Schedule-Next") != "" || m.Header.Get("Esjet-Custom") != "kept" {
		t.Fatalf("headers: %v", m.Header)
	}
	if e := m.Header.Get(HeaderError); len(e) > maxErrorLen+len("…") || !strings.HasSuffix(e, "…") || !strings.HasPrefix(e, "éé") {
		t.Fatalf("error not capped on a rune boundary: %d bytes", len(e))
	}
}

func TestDeadLetterRoundTripsAndRedrivesWithoutItsDLQHeaders(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	delivered := EncodeCommand("ns", testRecord(), Command{ID: "trip:t1:4:0", Kind: "pay", Report: true}, now)
	at := now.Add(time.Minute)
	m := DeadLetterMsg("ns", delivered, 7, "card\ndeclined", 3, "node-1", at)
	dl := DecodeDeadLetter(&jetstream.RawStreamMsg{Subject: m.Subject, Sequence: 11, Header: m.Header, Data: m.Data, Time: now})
	if dl.Seq != 11 || dl.ID != "trip:t1:4:0" || dl.Kind != "pay" || dl.Error != "card declined" || dl.Attempts != 3 ||
		dl.Worker != "node-1" || !dl.DeadAt.Equal(at) || dl.OutboxSeq != 7 || dl.AggregateVersion != 4 || dl.DecisionSeq != 42 ||
		dl.CorrelationID != "corr-1" || string(dl.Payload) != "null" {
		t.Fatalf("decoded %+v", dl)
	}
	if !IsDeadLetterSubject("ns", m.Subject) || IsDeadLetterSubject("ns", AuditSubject("ns", "pay")) {
		t.Fatal("dead letter and audit subjects not told apart")
	}
	out := RedriveMsg("ns", &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: 11, Header: m.Header, Data: m.Data})
	if out.Subject != "ns.outbox.pay" || out.Header.Get(jetstream.MsgIDHeader) != "trip:t1:4:0:redrive:11" ||
		!IsRedrive(dl.ID, out.Header.Get(jetstream.MsgIDHeader)) || IsRedrive(dl.ID, dl.ID) {
		t.Fatalf("redrive %q %v", out.Subject, out.Header)
	}
	for _, k := range dlqOnly {
		if out.Header.Get(k) != "" {
			t.Errorf("re-driven copy keeps %s", k)
		}
	}
	c, err := DecodeCommand(out)
	if err != nil || c.ID != dl.ID || c.Version != 4 || !c.Report {
		t.Fatalf("re-driven copy decodes as %+v, %v", c, err)
	}
}

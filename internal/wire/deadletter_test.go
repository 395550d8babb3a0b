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
	if m.Subject != "ns.dlq.letter.pay.9" || m.Header.Get(jetstream.MsgIDHeader) != "dlq:x:1:9" {
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
	if !IsDeadLetterSubject("ns", m.Subject) || IsDeadLetterSubject("ns", AuditSubject("ns", "pay", 11)) ||
		IsDeadLetterSubject("ns", SettledSubject("ns", "pay", 11)) || IsDeadLetterSubject("ns", "ns.dlq.letter.pay") {
		t.Fatal("dead letter, settled and audit subjects not told apart")
	}
	if k, ok := KindOfAudit("ns", AuditSubject("ns", "pay", 11)); !ok || k != "pay" {
		t.Fatalf("audit kind %q %v", k, ok)
	}
	raw := &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: 11, Header: m.Header, Data: m.Data, Time: now}
	set, action := DecodeSettled(&jetstream.RawStreamMsg{Subject: SettledSubject("ns", "pay", 11), Sequence: 30,
		Header: SettledMsg("ns", raw, "discarded").Header, Data: m.Data, Time: now})
	if set.Seq != 11 || set.Kind != "pay" || set.ID != dl.ID || action != "discarded" || set.Error != "card declined" {
		t.Fatalf("settled copy decodes as %+v, %q", set, action)
	}
	out := RedriveMsg("ns", &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: 11, Header: m.Header, Data: m.Data}, PriorityNormal, 0)
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

func TestARedriveGoesToItsBandAboveTheFenceItDiedWith(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	delivered := EncodeCommand("ns", testRecord(), Command{ID: "trip:t1:4:0", Kind: "pay", Priority: PriorityHigh}, now)
	if delivered.Subject != "ns.outbox.pay.high" || KindOfCommandSubject("ns", delivered.Subject) != "pay" {
		t.Fatalf("a high command on %s", delivered.Subject)
	}
	if c, err := DecodeCommand(delivered); err != nil || c.Priority != PriorityHigh || c.FenceBase != 0 {
		t.Fatalf("decoded %+v, %v", c, err)
	}
	m := DeadLetterMsg("ns", delivered, 7, "no", 3, "node-1", now)
	m.Header.Set(HeaderDeadFence, "912")
	raw := &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: 11, Header: m.Header, Data: m.Data}
	if m.Subject != "ns.dlq.letter.pay.7" || DeadFence(raw) != 912 {
		t.Fatalf("dead letter on %s, fence %d", m.Subject, DeadFence(raw))
	}
	out := RedriveMsg("ns", raw, PriorityLow, 912)
	c, err := DecodeCommand(out)
	if err != nil || out.Subject != "ns.outbox.pay.low" || c.Priority != PriorityLow || c.FenceBase != 912 || out.Header.Get(HeaderDeadFence) != "" {
		t.Fatalf("re-driven low to %s as %+v, %v (headers %v)", out.Subject, c, err, out.Header)
	}
	if n := RedriveMsg("ns", raw, PriorityNormal, 0); n.Subject != "ns.outbox.pay" || n.Header.Get(HeaderPriority) != "" || n.Header.Get(HeaderFenceBase) != "" {
		t.Fatalf("re-driven normal to %s with %v", n.Subject, n.Header)
	}
	for _, p := range Priorities {
		if k, got, ok := KindOfBandConsumer(BandConsumerName("pay", p)); !ok || k != "pay" || got != p {
			t.Errorf("band %q: consumer %s reads as %q %q %v", p, BandConsumerName("pay", p), k, got, ok)
		}
	}
	if BandConsumerName("pay", PriorityNormal) != "esjet-worker-pay" || BandConsumerName("pay", PriorityHigh) != "esjet-band-high-pay" {
		t.Fatal("band consumer names")
	}
	if _, _, ok := KindOfBandConsumer(RelayConsumerName); ok {
		t.Fatal("the relay's consumer reads as a band's")
	}
}

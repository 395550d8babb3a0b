package streams

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/esjet/esjet/internal/natstest"
)

// TestForeignMessageOnAnAggregateIsSkippedAndCountsInItsPosition: `nats pub
// <ns>.evt.doc.p1 hello` — a message esjet did not write, last on the
// aggregate's subject, which deny-delete keeps for ever. Loading steps over
// it (logged once, counted), the aggregate's position counts its sequence,
// and the next append expecting that position is stored. Before, Load
// refused the aggregate with ErrCorrupt for good.
func TestForeignMessageOnAnAggregateIsSkippedAndCountsInItsPosition(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	h := provisioned([]*server.Server{s}, 1)(t, Config{})
	var logs natstest.Buffer
	l, err := Open(t.Context(), h.js, h.ns, Config{}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	first := mustAppend(t, h, decision("doc", "p1", "created"), Position{})
	ack, err := h.js.Publish(ctx, h.ns+".evt.doc.p1", []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}

	tail, err := l.LoadTail(ctx, aggRef("doc", "p1"), Position{})
	if err != nil {
		t.Fatalf("LoadTail of an aggregate with a stray message: %v", err)
	}
	if len(tail.Records) != 1 || len(tail.Foreign) != 1 || tail.Foreign[0].Seq != ack.Sequence || tail.Foreign[0].Subject != h.ns+".evt.doc.p1" || tail.Foreign[0].Size != 5 {
		t.Fatalf("tail = %+v, want the decision and the foreign message at seq %d", tail, ack.Sequence)
	}
	pos := tail.Position(Position{})
	if want := (Position{Seq: ack.Sequence, Version: 1}); pos != want {
		t.Fatalf("position = %+v, want %+v: the next append must expect the stray message", pos, want)
	}
	if last, err := l.Last(ctx, aggRef("doc", "p1")); err != nil || last != pos {
		t.Fatalf("Last = %+v, %v; want %+v", last, err, pos)
	}

	// An append expecting the last decision conflicts and learns the true position.
	_, err = l.Append(ctx, decision("doc", "p1", "edited"), first.Position())
	var conflict *ConflictError
	if !errors.As(err, &conflict) || conflict.Actual != pos {
		t.Fatalf("append behind the stray message: %v, want a conflict naming %+v", err, pos)
	}
	second, err := l.Append(ctx, decision("doc", "p1", "edited"), pos)
	if err != nil || second.FirstVersion() != 2 {
		t.Fatalf("append expecting the stray message's seq: %+v, %v; want version 2 stored", second, err)
	}

	recs, err := l.Load(ctx, "doc", "p1", Position{}, AtLeast(second.Seq))
	if err != nil || len(recs) != 2 || recs[1].Seq != second.Seq {
		t.Fatalf("Load after: %d records, %v; want the two decisions", len(recs), err)
	}
	if tail, err := l.LoadTail(ctx, aggRef("doc", "p1"), first.Position(), AtLeast(ack.Sequence)); err != nil || tail.LastSeq != second.Seq {
		t.Fatalf("LoadTail after the first decision, at least the stray seq: %+v, %v", tail, err)
	}
	if n := l.ForeignSkipped(); n != 1 {
		t.Errorf("ForeignSkipped = %d after several loads of one stray message, want 1", n)
	}
	if n := strings.Count(logs.String(), "not an esjet decision"); n != 1 || !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("the stray message was logged %d times at WARN, want once:\n%s", n, logs.String())
	}

	// The whole-log reader steps over it too.
	all, err := l.ReadFrom(ctx, 0, 0)
	if err != nil || len(all) != 2 {
		t.Fatalf("ReadFrom: %d records, %v; want the two decisions", len(all), err)
	}
}

// TestForeignMessageAloneOnASubject: the stray message is the subject's
// only one. The aggregate is new (version 0) but its first append must
// expect the stray message's sequence, and then reads normally.
func TestForeignMessageAloneOnASubject(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	h := provisioned([]*server.Server{s}, 1)(t, Config{})
	ctx := t.Context()
	ack, err := h.js.Publish(ctx, h.ns+".evt.doc.p2", []byte(`{"v":1,"id":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	tail, err := h.log.LoadTail(ctx, aggRef("doc", "p2"), Position{})
	if err != nil || len(tail.Records) != 0 || tail.Position(Position{}) != (Position{Seq: ack.Sequence}) {
		t.Fatalf("LoadTail = %+v, %v; want no records at seq %d version 0", tail, err, ack.Sequence)
	}
	if last, err := h.log.Last(ctx, aggRef("doc", "p2")); err != nil || last != (Position{Seq: ack.Sequence}) {
		t.Fatalf("Last = %+v, %v; want seq %d version 0", last, err, ack.Sequence)
	}
	rec := mustAppend(t, h, decision("doc", "p2", "created"), tail.Position(Position{}))
	if rec.FirstVersion() != 1 {
		t.Fatalf("first decision after the stray message has version %d, want 1", rec.FirstVersion())
	}
	recs, err := h.log.Load(ctx, "doc", "p2", Position{})
	if err != nil || len(recs) != 1 {
		t.Fatalf("Load: %d records, %v", len(recs), err)
	}
}

package streams

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/wire"
)

// TestNewerEnvelopeIsRefusedNotSkipped: a decision a newer build wrote
// (envelope version 2, said by its header or by its payload) is not a
// foreign message to step over — the aggregate's history goes on in it.
// Loading that aggregate fails with an EnvelopeError (counted, logged at
// ERROR once, listed by Refused); another aggregate loads as before.
func TestNewerEnvelopeIsRefusedNotSkipped(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	h := provisioned([]*server.Server{s}, 1)(t, Config{})
	var logs natstest.Buffer
	l, err := Open(t.Context(), h.js, h.ns, Config{}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, id := range []string{"p1", "p2", "p3"} {
		mustAppend(t, h, decision("doc", id, "created"), Position{})
	}
	byHeader := nats.NewMsg(h.ns + ".evt.doc.p1")
	byHeader.Header.Set(wire.HeaderEnvelope, "2")
	byHeader.Data = []byte(`{"v":2,"whatever":"a later build chose"}`)
	byPayload := nats.NewMsg(h.ns + ".evt.doc.p3")
	byPayload.Header.Set(wire.HeaderEnvelope, "1")
	byPayload.Data = []byte(`{"v":2,"id":"d","aggregate_type":"doc","aggregate_id":"p3","events":[{"type":"x","version":2}]}`)
	var seqs []uint64
	for _, m := range []*nats.Msg{byHeader, byPayload} {
		ack, err := h.js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}

	for i, id := range []string{"p1", "p3"} {
		_, err = l.LoadTail(ctx, aggRef("doc", id), Position{})
		var ee *EnvelopeError
		if !errors.As(err, &ee) || !errors.Is(err, ErrEnvelopeTooNew) || ee.Version != 2 || ee.Seq != seqs[i] {
			t.Fatalf("LoadTail of %s, whose last message has envelope 2: %v; want an EnvelopeError (version 2, seq %d)", id, err, seqs[i])
		}
	}
	if recs, err := l.Load(ctx, "doc", "p2", Position{}); err != nil || len(recs) != 1 {
		t.Fatalf("Load of p2: %d records, %v; want its one decision", len(recs), err)
	}
	if _, err := l.ReadFrom(ctx, 0, 0); !errors.Is(err, ErrEnvelopeTooNew) {
		t.Fatalf("ReadFrom across the newer envelope: %v; want ErrEnvelopeTooNew (a projection must not step over it)", err)
	}
	_, _ = l.LoadTail(ctx, aggRef("doc", "p1"), Position{})
	count, refused := l.Refused()
	if count < 4 || len(refused) != 2 || refused[0].Seq != seqs[0] || refused[1].Seq != seqs[1] || l.ForeignSkipped() != 0 {
		t.Fatalf("Refused = %d, %+v; foreign %d: want ≥ 4 reads of the 2 messages, none foreign", count, refused, l.ForeignSkipped())
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 2 {
		t.Fatalf("%d ERROR lines, want one per refused message:\n%s", n, logs.String())
	}
}

// TestAReadOfTheLogStopsBeforeANewerMessage: a page of the whole log (GET
// /v1/log) ends before a message a newer build wrote, with the events
// before it, and the read that starts at it is refused: a reader gets all
// it can read, and never a page that skips the message.
func TestAReadOfTheLogStopsBeforeANewerMessage(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	h := provisioned([]*server.Server{s}, 1)(t, Config{})
	ctx := t.Context()
	mustAppend(t, h, decision("doc", "p1", "created"), Position{})
	mustAppend(t, h, decision("doc", "p2", "created", "named"), Position{})
	newer := nats.NewMsg(h.ns + ".evt.doc.p3")
	newer.Header.Set(wire.HeaderEnvelope, "2")
	newer.Data = []byte(`{"v":2}`)
	if _, err := h.js.PublishMsg(ctx, newer); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, h, decision("doc", "p4", "created"), Position{})

	evs, next, err := h.log.ReadAfter(ctx, 0, 100)
	if err != nil || len(evs) != 3 || next != wire.EndOfSeq(2) {
		t.Fatalf("ReadAfter(0) = %d events, next %d, %v; want the 3 events before the newer message, next %d", len(evs), next, err, wire.EndOfSeq(2))
	}
	if evs, _, err := h.log.ReadAfter(ctx, next, 100); !errors.Is(err, ErrEnvelopeTooNew) || len(evs) != 0 {
		t.Fatalf("ReadAfter at the newer message = %d events, %v; want ErrEnvelopeTooNew and none", len(evs), err)
	}
}

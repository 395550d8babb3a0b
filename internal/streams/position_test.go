package streams

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/wire"
)

func TestPositionArithmetic(t *testing.T) {
	if p := wire.EventPosition(42, 3); p != 420003 {
		t.Fatalf("wire.EventPosition(42, 3) = %d, want 420003", p)
	}
	if s, i := wire.SplitPosition(420003); s != 42 || i != 3 {
		t.Fatalf("wire.SplitPosition(420003) = %d, %d", s, i)
	}
	for _, c := range []struct {
		after uint64
		seq   uint64
		skip  int
		name  string
	}{
		{0, 1, 0, "from scratch"},
		{420003, 42, 4, "inside a decision"},
		{wire.EndOfSeq(42), 43, 0, "after a whole message"},
	} {
		if seq, skip := wire.ResumeSeq(c.after); seq != c.seq || skip != c.skip {
			t.Errorf("%s: wire.ResumeSeq(%d) = %d, %d; want %d, %d", c.name, c.after, seq, skip, c.seq, c.skip)
		}
	}
}

// TestReadAfterEveryPositionReturnsExactlyTheEventsAfterIt: positions
// strictly increase across every event of the log, and a read resumed at
// any of them (or at the end of a foreign message, or in pages of any size)
// returns exactly the events after it.
func TestReadAfterEveryPositionReturnsExactlyTheEventsAfterIt(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	h := provisioned([]*server.Server{s}, 1)(t, Config{LoadBatch: 2})
	mustAppend(t, h, decision("order", "a", "placed", "priced", "paid"), Position{})
	b := mustAppend(t, h, decision("order", "b", "placed"), Position{})
	// A message esjet did not write, on an aggregate subject: stepped over.
	if _, err := h.js.Publish(t.Context(), h.ns+".evt.order.stray", []byte("not a decision")); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, h, decision("order", "b", "shipped", "delivered"), b.Position())

	all, next, err := h.log.ReadAfter(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"placed", "priced", "paid", "placed", "shipped", "delivered"}
	if len(all) != len(want) {
		t.Fatalf("read %d events, want %d: %+v", len(all), len(want), all)
	}
	for i, e := range all {
		if e.Type != want[i] {
			t.Errorf("event %d is %s, want %s", i, e.Type, want[i])
		}
		if i > 0 && e.Position <= all[i-1].Position {
			t.Errorf("position %d (%s) does not increase after %d", e.Position, e.Type, all[i-1].Position)
		}
		if e.Position != wire.EventPosition(e.Seq, e.Index) {
			t.Errorf("event %d: position %d is not seq %d × %d + index %d", i, e.Position, e.Seq, wire.PositionsPerDecision, e.Index)
		}
	}
	if next != wire.EndOfSeq(all[len(all)-1].Seq) {
		t.Errorf("next = %d after the whole log, want %d", next, wire.EndOfSeq(all[len(all)-1].Seq))
	}
	if all[0].Position != 10000 || all[2].Position != 10002 {
		t.Errorf("first decision's positions: %d, %d, want 10000, 10002", all[0].Position, all[2].Position)
	}
	for i, e := range all {
		got, _, err := h.log.ReadAfter(t.Context(), e.Position, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(all)-i-1 {
			t.Fatalf("after %d: %d events, want %d", e.Position, len(got), len(all)-i-1)
		}
		for j, g := range got {
			if g.Position != all[i+1+j].Position {
				t.Fatalf("after %d: event %d has position %d, want %d", e.Position, j, g.Position, all[i+1+j].Position)
			}
		}
	}
	// The stray message's seq is 3: after it come the last two events.
	if got, _, _ := h.log.ReadAfter(t.Context(), wire.EndOfSeq(3), 100); len(got) != 2 || got[0].Type != "shipped" {
		t.Fatalf("after the stray message: %+v", got)
	}
	// Pages of one event each reach the same events.
	var paged []LogEvent
	for p := uint64(0); ; {
		page, n, err := h.log.ReadAfter(t.Context(), p, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			if n != p {
				t.Fatalf("an empty page moved the cursor from %d to %d", p, n)
			}
			break
		}
		paged = append(paged, page...)
		p = n
	}
	if len(paged) != len(all) {
		t.Fatalf("paged read: %d events, want %d", len(paged), len(all))
	}
}

func TestAppendRefusesMoreEventsThanPositionsPerDecision(t *testing.T) {
	d := decision("order", "big")
	for range wire.MaxEventsPerDecision + 1 {
		d.Events = append(d.Events, Event{Type: "x"})
	}
	if _, err := prepare(d, Position{}, d.Events[0].Time); err == nil {
		t.Fatal("a decision of 10001 events was accepted")
	}
	d.Events = d.Events[:wire.MaxEventsPerDecision]
	if _, err := prepare(d, Position{}, d.Events[0].Time); err != nil {
		t.Fatalf("a decision of 10000 events: %v", err)
	}
}

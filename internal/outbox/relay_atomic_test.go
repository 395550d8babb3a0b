package outbox

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// outgoingOf encodes the commands of recs as the relay would send them.
func outgoingOf(e *relayEnv, recs []streams.Record) []outgoing {
	var out []outgoing
	for i, rec := range recs {
		for _, c := range rec.Commands {
			cm := wire.EncodeCommand(e.ns, rec, c, time.Now())
			out = append(out, outgoing{msg: i, cm: cm, sched: wire.IsSchedule(cm)})
		}
	}
	return out
}

// appendEach appends n decisions to aggregates prefix0…, the i-th issuing
// commands(i) commands of kind.
func (e *relayEnv) appendEach(t *testing.T, prefix, kind string, n int, commands func(i int) int) []streams.Record {
	t.Helper()
	recs := make([]streams.Record, n)
	for i := range n {
		recs[i] = e.appendWithCommands(t, fmt.Sprintf("%s%d", prefix, i), kind, commands(i), time.Time{})
	}
	return recs
}

// storedOnce fails unless every command in got is in OUTBOX once.
func storedOnce(t *testing.T, got map[string]int) {
	t.Helper()
	for id, n := range got {
		if n != 1 {
			t.Fatalf("command %s stored %d times", id, n)
		}
	}
}

func TestRelayStoresABatchOfCommandsAsOneAtomicBatchInOrder(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRelayEnv(t, s)
	recs := e.appendEach(t, "a", "ship", 12, func(i int) int { return 1 + i%2 })
	// A delayed command in the middle goes on its own, as a schedule.
	recs = append(recs[:6], append([]streams.Record{e.appendWithCommands(t, "later", "remind", 1, time.Now().Add(time.Hour))}, recs[6:]...)...)
	r, err := NewRelay(t.Context(), e.js, e.ns, RelayConfig{AtomicMin: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := outgoingOf(e, recs)
	if f := r.send(t.Context(), out); f != math.MaxInt {
		t.Fatalf("send failed at decision %d", f)
	}
	st := r.Stats()
	if st.AtomicBatches != 1 || st.Commands != int64(len(out)-1) || st.Scheduled != 1 {
		t.Fatalf("stats %+v: want the %d due commands in 1 atomic batch and 1 schedule", st, len(out)-1)
	}
	// The schedule first, then the due commands in decision order, one
	// after another.
	ob, _ := e.js.Stream(t.Context(), streams.NamesFor(e.ns).Outbox)
	if m, err := ob.GetMsg(t.Context(), 1); err != nil || m.Subject != wire.ScheduleSubject(e.ns, "remind", recs[6].Commands[0].ID) {
		t.Fatalf("OUTBOX seq 1: %v %v, want the schedule", m, err)
	}
	last := uint64(1)
	for _, o := range out {
		if o.sched {
			continue
		}
		m, err := ob.GetMsg(t.Context(), last+1)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get(wire.HeaderCommandID) != o.cm.Header.Get(wire.HeaderCommandID) {
			t.Fatalf("OUTBOX seq %d holds %s, want %s", last+1, m.Header.Get(wire.HeaderCommandID), o.cm.Header.Get(wire.HeaderCommandID))
		}
		last++
	}
}

// A command OUTBOX already holds that the relay does not know of (a relay
// that died after publishing, inside the duplicate window) fails the whole
// atomic batch (10201): the relay sends that batch again command by
// command, and OUTBOX keeps one copy of each.
func TestRelayAtomicBatchWithACommandOutboxHoldsStoresEachOnce(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRelayEnv(t, s)
	recs := e.appendEach(t, "d", "pay", 10, func(int) int { return 1 })
	out := outgoingOf(e, recs)
	if _, err := e.js.PublishMsg(t.Context(), wire.EncodeCommand(e.ns, recs[4], recs[4].Commands[0], time.Now())); err != nil {
		t.Fatal(err)
	}
	r, err := NewRelay(t.Context(), e.js, e.ns, RelayConfig{AtomicMin: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f := r.send(t.Context(), out); f != math.MaxInt {
		t.Fatalf("send failed at decision %d", f)
	}
	if st := r.Stats(); st.AtomicBatches != 0 || st.Commands != 9 || st.Duplicates != 1 {
		t.Fatalf("stats %+v: want the refused batch sent one by one: 9 commands and 1 duplicate", st)
	}
	got := e.outboxByCommand(t)
	if len(got) != len(recs) {
		t.Fatalf("OUTBOX holds %d commands, want %d", len(got), len(recs))
	}
	storedOnce(t, got)
}

// Through Run: every command once, with atomic batches under a burst.
func TestRelayWithAtomicBatchesRelaysEveryCommandOnce(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRelayEnv(t, s)
	recs := e.appendEach(t, "b", "ship", 60, func(i int) int { return i % 3 })
	want := 0
	for _, rec := range recs {
		want += len(rec.Commands)
	}
	r, _ := runRelay(t, e, RelayConfig{AtomicMin: 2, Batch: 32})
	natstest.Eventually(t, 10*time.Second, func() bool { return r.Stats().LastSeq == recs[len(recs)-1].Seq })
	if st := r.Stats(); st.Commands != int64(want) || st.AtomicBatches == 0 || st.Duplicates != 0 {
		t.Fatalf("stats %+v: want %d commands, some in atomic batches", st, want)
	}
	got := e.outboxByCommand(t)
	if len(got) != want {
		t.Fatalf("OUTBOX holds %d commands, want %d", len(got), want)
	}
	storedOnce(t, got)
	cons, _ := e.js.Consumer(t.Context(), streams.NamesFor(e.ns).Events, ConsumerName)
	info, err := cons.Info(t.Context())
	if err != nil || info.NumAckPending != 0 || info.AckFloor.Stream != recs[len(recs)-1].Seq {
		t.Fatalf("relay consumer: %+v %v", info, err)
	}
}

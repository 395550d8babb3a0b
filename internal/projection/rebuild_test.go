package projection

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// TestRebuildBuildsANewGenerationBesideTheServingOneAndSwitches: while
// generation 2 is built (its handler sees Replay), queries read generation
// 1 whole; once 2 has caught up queries read it, and a switch back serves
// 1, kept current meanwhile.
func TestRebuildBuildsANewGenerationBesideTheServingOneAndSwitches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 40 {
		e.append(t, "order", fmt.Sprint("o", i%4), "placed")
	}
	var replays atomic.Int64
	d := counter("rebuilt")
	inner := d.Handle
	d.Handle = func(ctx context.Context, tx *Tx, ev Event) error {
		if ev.Replay {
			replays.Add(1)
		}
		return inner(ctx, tx, ev)
	}
	e.run(t, testConfig(), d)
	v := NewViews(e.js, e.ns, 0)
	eventually(t, "generation 1 built", func() bool { return e.count(t, "rebuilt", "o0") == 10 })
	if replays.Load() != 0 {
		t.Fatalf("generation 1 saw %d replayed events: it is the live one", replays.Load())
	}
	gen, err := v.Rebuild(t.Context(), "rebuilt")
	if err != nil || gen != 2 {
		t.Fatalf("rebuild: %d, %v", gen, err)
	}
	eventually(t, "switched to generation 2", func() bool {
		st, _ := v.Status(t.Context(), "rebuilt")
		return st.Active == 2 && st.Previous == 1 && st.Build == nil
	})
	if replays.Load() != 40 {
		t.Fatalf("generation 2 saw %d replayed events, want 40", replays.Load())
	}
	if doc, err := v.Get(t.Context(), "rebuilt", "o0", Wait{}); err != nil || doc.Generation != 2 || string(doc.Value) != "10" {
		t.Fatalf("after the switch: %+v, %v", doc, err)
	}
	last := e.append(t, "order", "o0", "placed")
	if err := v.Switch(t.Context(), "rebuilt", 1); err != nil {
		t.Fatal(err)
	}
	doc, err := v.Get(t.Context(), "rebuilt", "o0", Wait{After: last.LastPosition()})
	if err != nil || doc.Generation != 1 || string(doc.Value) != "11" {
		t.Fatalf("switched back: %+v, %v", doc, err)
	}
	eventually(t, "generation 2 current too", func() bool {
		return e.checkpoint(t, "rebuilt", 2, 0).Position == wire.EndOfSeq(last.Seq)
	})
}

// TestARebuildSwitchesInUnderSteadyWrites: the partitions report their
// positions at each heartbeat, and while writes keep coming the log's end
// has always moved on since: "every partition at the log's end" is never
// seen. A rebuild switches in once every partition has passed where the
// log ended at the previous look, and the switched-in generation then
// counts every event.
func TestARebuildSwitchesInUnderSteadyWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 40 {
		e.append(t, "order", fmt.Sprint("o", i%4), "placed")
	}
	d := counter("busy")
	d.Partitions = 2
	cfg := testConfig()
	cfg.Heartbeat, cfg.LeaseTTL = time.Second, 5*time.Second // the default heartbeat: 20 writes between two
	e.run(t, cfg, d)
	v := NewViews(e.js, e.ns, 0)
	eventually(t, "generation 1 built", func() bool { return e.count(t, "busy", "o0") == 10 })
	if _, err := v.Rebuild(t.Context(), "busy"); err != nil {
		t.Fatal(err)
	}
	// A writer appends every 50 ms (many times per heartbeat, and well
	// below what the view keeps up with, even under -race) until the
	// switch.
	var written atomic.Int64
	written.Store(40)
	wctx, stopWriting := context.WithCancel(t.Context())
	writer := make(chan error, 1)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		var err error
		for ; wctx.Err() == nil && err == nil; <-tick.C {
			id := fmt.Sprint("o", written.Load()%4)
			e.mu.Lock()
			var rec streams.Record
			rec, err = e.log.Append(wctx, streams.Decision{ID: uuid.Must(uuid.NewV7()).String(), AggregateType: "order", AggregateID: id,
				Events: []streams.Event{{Type: "placed", Data: json.RawMessage(`{"n":1}`)}}}, e.pos["order/"+id])
			if err == nil {
				e.pos["order/"+id] = rec.Position()
				written.Add(1)
			}
			e.mu.Unlock()
		}
		writer <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := v.Status(t.Context(), "busy")
		if err == nil && st.Active == 2 {
			break
		}
		if time.Now().After(deadline) {
			stopWriting()
			<-writer
			t.Fatalf("generation 2 not switched in after 30 s of steady writes (%d events): build %+v", written.Load(), st.Build)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopWriting()
	if err := <-writer; err != nil && wctx.Err() == nil {
		t.Fatal(err)
	}
	w := written.Load() // o0 had (w+3)/4 of them, and one more now
	last := e.append(t, "order", "o0", "placed")
	doc, err := v.Get(t.Context(), "busy", "o0", Wait{After: last.LastPosition()})
	if want := (w+3)/4 + 1; err != nil || doc.Generation != 2 || string(doc.Value) != fmt.Sprint(want) {
		t.Fatalf("generation 2 after %d events: %+v, %v; want o0 = %d", w+1, doc, err, want)
	}
}

package projection

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

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

package projection

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/esjet/esjet/internal/wire"
)

// weighted adds *weight per event: a handler whose new version (weight 2)
// gives another view than the old one, as a rebuild is for.
func weighted(name string, weight *atomic.Int64) Definition {
	return Definition{Name: name, Handle: func(ctx context.Context, tx *Tx, e Event) error {
		var n int64
		if _, err := tx.Get(e.AggregateID, &n); err != nil {
			return err
		}
		return tx.Put(e.AggregateID, n+weight.Load())
	}}
}

// rebuildAndWait rebuilds view and waits until the new generation serves.
func rebuildAndWait(t *testing.T, v *Views, view string) int {
	t.Helper()
	gen, err := v.Rebuild(t.Context(), view)
	if err != nil {
		t.Fatalf("rebuild %s: %v", view, err)
	}
	eventually(t, fmt.Sprintf("generation %d of %s serving", gen, view), func() bool {
		st, err := v.Status(t.Context(), view)
		return err == nil && st.Active == gen && st.Build == nil
	})
	return gen
}

// viewBuckets lists the namespace's buckets of view.
func (e *env) viewBuckets(t *testing.T, view string) []string {
	t.Helper()
	var out []string
	for name := range e.js.KeyValueStoreNames(t.Context()).Name() {
		if b := strings.TrimPrefix(name, "KV_"); strings.HasPrefix(b, e.ns+"_view_"+view) {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

// TestRebuildsTakeTurnsInThreeBuckets: the generations of a view live in
// three buckets a NATS role can name (<ns>_view_<name>, -b, -c); the
// fourth generation reuses the first one's bucket, emptied first: it is
// built from the start by the new handler, not resumed from what the
// dropped generation left there.
func TestRebuildsTakeTurnsInThreeBuckets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 20 {
		e.append(t, "order", fmt.Sprint("o", i%2), "placed")
	}
	var weight atomic.Int64
	weight.Store(1)
	e.run(t, testConfig(), weighted("turns", &weight))
	v := NewViews(e.js, e.ns, 0)
	eventually(t, "generation 1 built", func() bool { return e.count(t, "turns", "o0") == 10 })
	if g := rebuildAndWait(t, v, "turns"); g != 2 {
		t.Fatalf("first rebuild made generation %d, want 2", g)
	}
	if g := rebuildAndWait(t, v, "turns"); g != 3 {
		t.Fatalf("second rebuild made generation %d, want 3", g)
	}
	// Generation 1 is dropped now (3 serves, 2 is the previous one); a new
	// handler version is rebuilt into its bucket.
	weight.Store(2)
	if g := rebuildAndWait(t, v, "turns"); g != 4 {
		t.Fatalf("third rebuild made generation %d, want 4", g)
	}
	if got := e.count(t, "turns", "o0"); got != 20 {
		t.Errorf("generation 4 counts %d for o0, want 20 (10 events of weight 2, built from the start in an emptied bucket)", got)
	}
	want := wire.ViewBuckets(e.ns, "turns")
	if got := e.viewBuckets(t, "turns"); !slices.Equal(got, want) {
		t.Errorf("buckets of the view: %v, want %v", got, want)
	}
	if ViewBucket(e.ns, "turns", 4) != want[0] {
		t.Errorf("generation 4 is in %s, want %s", ViewBucket(e.ns, "turns", 4), want[0])
	}
	// After a switch back (3 serves, 4 is the previous one) the next
	// rebuild takes the one slot neither holds.
	if err := v.Switch(t.Context(), "turns", 3); err != nil {
		t.Fatal(err)
	}
	if g := rebuildAndWait(t, v, "turns"); g != 5 || ViewBucket(e.ns, "turns", g) != want[1] {
		t.Errorf("rebuild after a switch back made generation %d in %s, want 5 in %s", g, ViewBucket(e.ns, "turns", g), want[1])
	}
	// Switched back to 3 (5 the previous one), generation 6 would share
	// 3's bucket: the rebuild passes over it and makes 7.
	if err := v.Switch(t.Context(), "turns", 3); err != nil {
		t.Fatal(err)
	}
	if g := rebuildAndWait(t, v, "turns"); g != 7 || ViewBucket(e.ns, "turns", g) != want[0] {
		t.Errorf("rebuild with generation 6's bucket serving made generation %d in %s, want 7 in %s", g, ViewBucket(e.ns, "turns", g), want[0])
	}
	if got := e.count(t, "turns", "o0"); got != 20 {
		t.Errorf("generation 7 counts %d for o0, want 20", got)
	}
}

// TestAViewRebuiltBeforeSlotsKeepsServingAndMovesIntoThem: a control record
// from before the slots (no slots_from) whose generation 2 lives in
// <ns>_view_<name>_g2 is still served from there; the next rebuilds go
// into the slots.
func TestAViewRebuiltBeforeSlotsKeepsServingAndMovesIntoThem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 20 {
		e.append(t, "order", fmt.Sprint("o", i%2), "placed")
	}
	kv, err := ensureBucket(t.Context(), e.js, wire.ProjectionsBucket(e.ns), 1, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := json.Marshal(map[string]any{"active": 2, "previous": 1, "latest": 2, "partitions": 1})
	if _, err := kv.Create(t.Context(), ctlKey("legacy"), old); err != nil {
		t.Fatal(err)
	}
	e.run(t, testConfig(), counter("legacy"))
	v := NewViews(e.js, e.ns, 0)
	eventually(t, "generation 2 built in its old bucket", func() bool { return e.count(t, "legacy", "o0") == 10 })
	legacy := e.ns + "_view_legacy_g2"
	lkv, err := e.js.KeyValue(t.Context(), legacy)
	if err != nil {
		t.Fatalf("generation 2's bucket %s: %v", legacy, err)
	}
	if en, err := lkv.Get(t.Context(), "o0"); err != nil || string(en.Value()) != "10" {
		t.Fatalf("o0 in %s: %v", legacy, err)
	}
	if g := rebuildAndWait(t, v, "legacy"); g != 3 {
		t.Fatalf("rebuild made generation %d, want 3", g)
	}
	if g := rebuildAndWait(t, v, "legacy"); g != 4 {
		t.Fatalf("rebuild made generation %d, want 4", g)
	}
	if got := e.count(t, "legacy", "o0"); got != 10 {
		t.Errorf("generation 4 counts %d for o0, want 10", got)
	}
	want := []string{ViewBucket(e.ns, "legacy", 1), ViewBucket(e.ns, "legacy", 3), legacy}
	slices.Sort(want)
	if got := e.viewBuckets(t, "legacy"); !slices.Equal(got, want) {
		t.Errorf("buckets of the view: %v, want %v (the old _g2 left as it was)", got, want)
	}
}

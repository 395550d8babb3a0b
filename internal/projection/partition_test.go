package projection

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// spend is a view with documents shared across aggregates (a total per
// aggregate type) and one per aggregate: partitions write the shared ones
// concurrently.
func spend(name string, parts int) Definition {
	return Definition{Name: name, Partitions: parts, Handle: func(ctx context.Context, tx *Tx, e Event) error {
		for _, k := range []string{"total." + e.AggregateType, "agg." + e.AggregateID} {
			var n int
			if _, err := tx.Get(k, &n); err != nil {
				return err
			}
			if err := tx.Put(k, n+1); err != nil {
				return err
			}
		}
		return nil
	}}
}

// TestNPartitionsGiveTheSameViewAsOne: four partitions (owned by two
// runners) build exactly the view one partition builds, documents shared
// across partitions included.
func TestNPartitionsGiveTheSameViewAsOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var last streams.Record
	for i := range 200 {
		last = e.append(t, []string{"order", "trip"}[i%2], fmt.Sprint("a", i%17), "x", "y")
	}
	e.run(t, testConfig(), spend("one", 0))
	e.run(t, testConfig(), spend("four", 4))
	e.run(t, testConfig(), spend("four", 4))
	end := wire.EndOfSeq(last.Seq)
	defer func() {
		if t.Failed() {
			for p := range 4 {
				t.Logf("four p%d: %+v", p, e.checkpoint(t, "four", 1, p))
			}
			t.Logf("one: %+v end %d", e.checkpoint(t, "one", 1, 0), end)
		}
	}()
	eventually(t, "both caught up", func() bool {
		if e.checkpoint(t, "one", 1, 0).Position != end {
			return false
		}
		for p := range 4 {
			if e.checkpoint(t, "four", 1, p).Position != end {
				return false
			}
		}
		return true
	})
	v := NewViews(e.js, e.ns, 0)
	one, err := v.List(t.Context(), "one", ListQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	four, err := v.List(t.Context(), "four", ListQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Docs) != 19 || len(four.Docs) != len(one.Docs) {
		t.Fatalf("documents: one %d, four %d, want 19", len(one.Docs), len(four.Docs))
	}
	for i := range one.Docs {
		if one.Docs[i].Key != four.Docs[i].Key || string(one.Docs[i].Value) != string(four.Docs[i].Value) {
			t.Errorf("%s: one %s, four %s=%s", one.Docs[i].Key, one.Docs[i].Value, four.Docs[i].Key, four.Docs[i].Value)
		}
	}
}

// failing fails every event of aggregate bad while broken is set.
func failing(name string, parts int, broken *atomic.Bool) Definition {
	d := counter(name)
	inner := d.Handle
	d.Partitions = parts
	d.Handle = func(ctx context.Context, tx *Tx, e Event) error {
		if e.AggregateID == "bad" && broken.Load() {
			return errors.New("cannot fold this")
		}
		return inner(ctx, tx, e)
	}
	return d
}

// TestPartitionedParksTheFailingAggregateAndGoesOn: the failing event is
// parked with the later events of its aggregate, other aggregates go on,
// a read-your-write on it fails at once, and a retry after the fix applies
// the parked events in order, exactly once.
func TestPartitionedParksTheFailingAggregateAndGoesOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var broken atomic.Bool
	broken.Store(true)
	first := e.append(t, "order", "bad", "placed")
	e.append(t, "order", "good", "placed")
	later := e.append(t, "order", "bad", "shipped", "delivered")
	last := e.append(t, "order", "good", "shipped")
	e.run(t, testConfig(), failing("parking", 2, &broken))
	v := NewViews(e.js, e.ns, 0)
	eventually(t, "good counted", func() bool { return e.count(t, "parking", "good") == 2 })
	eventually(t, "three events of bad parked", func() bool {
		ps, _ := v.Parked(t.Context(), "parking")
		return len(ps) == 3
	})
	ps, _ := v.Parked(t.Context(), "parking")
	if ps[0].Event.Position != first.EventPosition(0) || ps[0].Error == "" || !ps[1].Behind || ps[2].Event.Position != later.EventPosition(1) {
		t.Fatalf("parked: %+v", ps)
	}
	start := time.Now()
	_, err := v.Get(t.Context(), "parking", "bad", Wait{After: later.LastPosition(), For: 5 * time.Second})
	if !errors.Is(err, ErrParked) || time.Since(start) > 2*time.Second {
		t.Fatalf("wait on a parked aggregate: %v after %s, want ErrParked at once", err, time.Since(start))
	}
	// Another aggregate goes on, but a read after a position past the
	// parked event cannot promise it: the view does not hold that event,
	// and any document may depend on it. The position says so too.
	if _, err := v.Get(t.Context(), "parking", "good", Wait{After: last.LastPosition()}); !errors.Is(err, ErrParked) {
		t.Fatalf("wait past a parked event of another aggregate: %v, want ErrParked", err)
	}
	if d, err := v.Get(t.Context(), "parking", "good", Wait{}); err != nil || d.Position >= first.EventPosition(0) {
		t.Fatalf("document with a parked event before it: position %d (%v), want < %d", d.Position, err, first.EventPosition(0))
	}
	st, err := v.Status(t.Context(), "parking")
	if err != nil || st.Health != Yellow || st.Parked != 3 {
		t.Fatalf("status with parked events: %+v, %v", st, err)
	}
	broken.Store(false)
	req, err := v.Retry(t.Context(), "parking", first.EventPosition(0), "ops")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "retry done", func() bool { ok, _ := v.Done(t.Context(), "parking", req); return ok })
	if n := e.count(t, "parking", "bad"); n != 3 {
		t.Fatalf("bad counted %d after the retry, want 3", n)
	}
	if ps, _ := v.Parked(t.Context(), "parking"); len(ps) != 0 {
		t.Fatalf("still parked: %+v", ps)
	}
	if _, err := v.Get(t.Context(), "parking", "good", Wait{After: last.LastPosition()}); err != nil {
		t.Fatalf("wait after the retry: %v", err)
	}
}

// TestSingleStopsAtAFailingEventAndASkipLeavesARecord: a single
// projection stops at the failing event (status red, a wait fails at
// once), and an operator's skip moves past it with a record.
func TestSingleStopsAtAFailingEventAndASkipLeavesARecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var broken atomic.Bool
	broken.Store(true)
	e.append(t, "order", "good", "placed")
	bad := e.append(t, "order", "bad", "placed")
	after := e.append(t, "order", "good", "shipped")
	e.run(t, testConfig(), failing("single", 0, &broken))
	v := NewViews(e.js, e.ns, 0)
	eventually(t, "stopped", func() bool {
		st, _ := v.Status(t.Context(), "single")
		return st.Health == Red && st.Position == bad.EventPosition(0)-1
	})
	if n := e.count(t, "single", "good"); n != 1 {
		t.Fatalf("good counted %d, want 1: the projection went past its failing event", n)
	}
	if _, err := v.Get(t.Context(), "single", "good", Wait{After: after.LastPosition()}); !errors.Is(err, ErrParked) {
		t.Fatalf("wait past the stop: %v, want ErrParked", err)
	}
	// A position below the first decision's names none: invalid, not a
	// failed read of the log.
	if _, err := v.Get(t.Context(), "single", "good", Wait{After: 50}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("wait after position 50: %v, want ErrInvalid", err)
	}
	if _, err := v.Skip(t.Context(), "single", bad.EventPosition(0), "ops", ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("skip without a reason: %v", err)
	}
	if _, err := v.Skip(t.Context(), "single", bad.EventPosition(0), "ops", "bad data, fixed by hand"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Get(t.Context(), "single", "good", Wait{After: after.LastPosition()}); err != nil {
		t.Fatalf("after the skip: %v", err)
	}
	if n := e.count(t, "single", "good"); n != 2 || e.count(t, "single", "bad") != 0 {
		t.Fatalf("after the skip: good %d bad %d, want 2, 0", n, e.count(t, "single", "bad"))
	}
	skips, _ := v.Skips(t.Context(), "single")
	if len(skips) != 1 || skips[0].By != "ops" || skips[0].Event.Position != bad.EventPosition(0) {
		t.Fatalf("skip records: %+v", skips)
	}
}

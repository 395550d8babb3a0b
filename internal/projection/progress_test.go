package projection

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// TestFilteredProjectionCheckpointReachesTheLogsEnd: a projection of trips
// only, on a log whose recent events are all orders, stands at the log's
// end once caught up (lag 0), so a restart re-scans nothing.
func TestFilteredProjectionCheckpointReachesTheLogsEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.append(t, "trip", "t1", "requested")
	var last streams.Record
	for range 20 {
		last = e.append(t, "order", "o1", "placed")
	}
	d := counter("trips_only")
	d.AggregateTypes = []string{"trip"}
	e.run(t, testConfig(), d)
	eventually(t, "checkpoint at the log's end", func() bool {
		return e.checkpoint(t, "trips_only", 1, 0).Position == wire.EndOfSeq(last.Seq)
	})
	st, err := NewViews(e.js, e.ns, 0).Status(t.Context(), "trips_only")
	if err != nil || st.Lag != 0 || st.Health != Green {
		t.Fatalf("status: %+v, %v", st, err)
	}
	if n := e.count(t, "trips_only", "t1"); n != 1 {
		t.Fatalf("t1 counted %d", n)
	}
	// An event-type filter skips others too, and the position still moves.
	d2 := Definition{Name: "placed_only", EventTypes: []string{"requested"}, Handle: d.Handle}
	e.run(t, testConfig(), d2)
	eventually(t, "event-filtered checkpoint at the end", func() bool {
		return e.checkpoint(t, "placed_only", 1, 0).Position == wire.EndOfSeq(last.Seq)
	})
}

// TestAFrozenOwnerTurnsRedWithinTheLeaseTTLAndAnIdleLogStaysGreen.
func TestAFrozenOwnerTurnsRedWithinTheLeaseTTLAndAnIdleLogStaysGreen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.append(t, "order", "o1", "placed")
	stop := e.run(t, testConfig(), counter("health"))
	v := NewViews(e.js, e.ns, testConfig().LeaseTTL)
	eventually(t, "green", func() bool { st, _ := v.Status(t.Context(), "health"); return st.Health == Green && st.Lag == 0 })
	// Idle for several lease TTLs: still green (the owner heartbeats).
	time.Sleep(3 * testConfig().LeaseTTL)
	if st, _ := v.Status(t.Context(), "health"); st.Health != Green {
		t.Fatalf("idle log: %s (%s)", st.Health, st.Reason)
	}
	// Freeze the owner: its lease stays, its heartbeats stop (what a
	// SIGSTOPped process leaves behind).
	stop()
	kv, err := e.js.KeyValue(t.Context(), wire.ProjectionsBucket(e.ns))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(Lease{Owner: "frozen", Heartbeat: time.Now().UTC(), State: StateRunning})
	if _, err := kv.Put(t.Context(), leaseKey("health", 1, 0), b); err != nil {
		t.Fatal(err)
	}
	if st, _ := v.Status(t.Context(), "health"); st.Health != Green {
		t.Fatalf("right after the last heartbeat: %s (%s)", st.Health, st.Reason)
	}
	start := time.Now()
	eventually(t, "red at lag 0", func() bool {
		st, _ := v.Status(t.Context(), "health")
		return st.Health == Red && st.Lag == 0
	})
	if d := time.Since(start); d > 3*testConfig().LeaseTTL {
		t.Fatalf("red after %s, want within the lease TTL %s", d, testConfig().LeaseTTL)
	}
}

package bench

import (
	"testing"

	"github.com/esjet/esjet/config"
)

// TestSweepRunsEachPhasePerWorkerCountBesideSQLite: --workers 1,4 runs
// append and effects once per count (relay rounds and kinds do not
// collide between them), each with the SQLite-outbox baseline measured
// over the same number of operations, and append ×16 beside raw
// JetStream's own group commit.
func TestSweepRunsEachPhasePerWorkerCountBesideSQLite(t *testing.T) {
	cfg := config.Default()
	cfg.Namespace = "sweeptest"
	const count = 60
	rep, err := Run(t.Context(), Options{Config: cfg, Count: count, Sweep: []int{1, 16}, Aggregates: 40,
		Phases: []string{PhaseAppend, PhaseEffects}})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name    string
		workers int
	}{{PhaseAppend, 1}, {PhaseAppend, 16}, {PhaseEffects, 1}, {PhaseEffects, 16}}
	if len(rep.Phases) != len(want) {
		t.Fatalf("%d phases, want %v: %+v", len(rep.Phases), want, rep.Phases)
	}
	for i, p := range rep.Phases {
		if p.Name != want[i].name || p.Workers != want[i].workers {
			t.Errorf("phase %d is %s ×%d, want %s ×%d", i, p.Name, p.Workers, want[i].name, want[i].workers)
		}
		if p.Error != "" || p.Errors != 0 {
			t.Errorf("%s ×%d: %d error(s): %s", p.Name, p.Workers, p.Errors, p.Error)
		}
		if p.SQLite == nil || p.SQLite.Ops != count || p.SQLiteRatio <= 0 {
			t.Errorf("%s ×%d: sqlite %+v ratio %g, want %d ops", p.Name, p.Workers, p.SQLite, p.SQLiteRatio, count)
		}
		// Under group commit (sync always) append runs JetStream's own
		// group commit beside it, except with one writer (no batch forms).
		wantGroup := p.Name == PhaseAppend && p.Workers > 1
		if g := p.RawGroup; (g != nil) != wantGroup || wantGroup && (g.Ops != count || p.RawGroupRatio <= 0 || p.RawGroupBatched > count || p.RawGroupBatches > p.RawGroupBatched) {
			t.Errorf("%s ×%d: raw group commit %+v (ratio %g, %d in %d batches), want it %v", p.Name, p.Workers, g, p.RawGroupRatio, p.RawGroupBatched, p.RawGroupBatches, wantGroup)
		}
	}
	if rep.Params.Workers != 16 || len(rep.Params.Sweep) != 2 {
		t.Errorf("params %+v", rep.Params)
	}
}

// TestSweepLoadsAFreshAggregatePerWorkerCount: with --workers 1,2 the load
// phases run once per count, and the second count's cold load reads an
// aggregate of exactly 1,000 events like the first (an earlier count's
// fill must not leak into it: it did, "loaded version 2000, want 1000").
func TestSweepLoadsAFreshAggregatePerWorkerCount(t *testing.T) {
	cfg := config.Default()
	cfg.Namespace = "sweepload"
	cfg.NATS.Embedded.Sync = config.SyncInterval
	rep, err := Run(t.Context(), Options{Config: cfg, Count: 4, Sweep: []int{1, 2}, Phases: []string{PhaseLoad}})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name    string
		workers int
	}{{PhaseLoad, 1}, {PhaseLoad + "-snap", 1}, {PhaseLoad, 2}, {PhaseLoad + "-snap", 2}}
	if len(rep.Phases) != len(want) {
		t.Fatalf("%d phases, want %v: %+v", len(rep.Phases), want, rep.Phases)
	}
	for i, p := range rep.Phases {
		if p.Name != want[i].name || p.Workers != want[i].workers {
			t.Errorf("phase %d is %s ×%d, want %s ×%d", i, p.Name, p.Workers, want[i].name, want[i].workers)
		}
		if p.Error != "" || p.Errors != 0 || p.Esjet.Ops != 4 {
			t.Errorf("%s ×%d: %d op(s), %d error(s): %s", p.Name, p.Workers, p.Esjet.Ops, p.Errors, p.Error)
		}
	}
}

package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/esjet/esjet/config"
)

// TestDrainPhasesPairBothSides runs the relay and effects phases in count
// mode on an embedded node and checks that each finished without error
// with both sides measured over the same messages. (The replay phase, the
// third drain phase, fills a 20,000-decision log first: too slow for a
// test; its raw side is tested in internal/bench/raw.)
func TestDrainPhasesPairBothSides(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	cfg := config.Default()
	cfg.Namespace = "benchtest"
	cfg.NATS.Embedded.Sync = config.SyncInterval
	const count = 300 // more than one relay batch
	rep, err := Run(t.Context(), Options{Config: cfg, Count: count, Workers: 8, Aggregates: 10,
		Phases: []string{PhaseEffects, PhaseRelay}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{PhaseRelay, PhaseEffects} // the canonical order
	if len(rep.Phases) != len(want) {
		t.Fatalf("%d phases, want %v: %+v", len(rep.Phases), want, rep.Phases)
	}
	for i, p := range rep.Phases {
		if p.Name != want[i] {
			t.Errorf("phase %d is %s, want %s", i, p.Name, want[i])
		}
		if p.Error != "" || p.Errors != 0 {
			t.Errorf("%s: %d error(s): %s", p.Name, p.Errors, p.Error)
		}
		if p.Raw == nil || p.Esjet.Ops != count || p.Raw.Ops != count || p.Esjet.OpsPerSec <= 0 || p.Raw.OpsPerSec <= 0 || p.Ratio <= 0 {
			t.Errorf("%s: esjet %+v raw %+v ratio %g: want %d ops on each side", p.Name, p.Esjet, p.Raw, p.Ratio, count)
		}
	}
}

// TestScalePhaseFillsAndMeasures runs the on-demand scale phase on a small
// store: every figure is filled in, the fill is what was asked for, and a
// healthy store reconciles without drift.
func TestScalePhaseFillsAndMeasures(t *testing.T) {
	cfg := config.Default()
	cfg.Namespace = "scaletest"
	cfg.NATS.Embedded.Sync = config.SyncInterval
	const decisions = 400
	heap := filepath.Join(t.TempDir(), "heap.prof")
	rep, err := Run(t.Context(), Options{Config: cfg, Workers: 8, Decisions: decisions, Phases: []string{PhaseScale}, HeapProfile: heap})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(heap); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b { // a pprof profile is gzipped
		t.Errorf("--heapprofile wrote %d bytes, not a profile: %v", len(b), err)
	}
	sc := rep.Scale
	if sc == nil {
		t.Fatalf("no scale figures: %+v", rep.Phases)
	}
	commands := decisions / scaleCommandEvery
	// The fill, its outcomes and the repeat run's decisions.
	if sc.Decisions != decisions || sc.Aggregates != decisions/scaleEventsPerAggregate || sc.EventsMsgs < uint64(decisions+commands) || sc.OutboxMsgs != uint64(commands) {
		t.Errorf("filled %+v, want %d decisions (+%d outcomes) and %d commands", sc, decisions, commands, commands)
	}
	if sc.ReconcileDrift != 0 {
		t.Errorf("reconcile found %d drift on a healthy store", sc.ReconcileDrift)
	}
	if sc.BytesPerDecision < 200 || sc.BytesPerCommand <= 0 || sc.StoreBytes <= 0 || sc.ReconcileSecs <= 0 ||
		sc.OutboxOldestSecs <= 0 || sc.OutboxOldestReads <= 0 || sc.OutboxMiddleReads <= 0 || sc.ColdP99MS <= 0 || sc.HistoryP99MS <= 0 || sc.HistoryPeakRSS <= 0 || sc.RSSAfter <= 0 || sc.ColdPeakRSS <= 0 || sc.ReconcileRSS <= 0 {
		t.Errorf("a figure is missing: %+v", sc)
	}
}

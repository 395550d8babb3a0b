package bench

import (
	"slices"
	"strings"
	"testing"

	"github.com/esjet/esjet/config"
)

// TestEdgePhaseCatchesUpBothSides runs the on-demand edge phase on a small
// backlog: a hub and a site (two nodes, each with its own server, linked as
// leaf nodes) and the raw pair of servers each catch up the whole backlog,
// and the row sets the two rates side by side.
func TestEdgePhaseCatchesUpBothSides(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four servers")
	}
	cfg := config.Default()
	cfg.Namespace = "edgetest"
	cfg.NATS.Embedded.Sync = config.SyncInterval
	const count = 300
	rep, err := Run(t.Context(), Options{Config: cfg, Count: count, Workers: 8, Aggregates: 10, Phases: []string{PhaseEdge}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Phases) != 1 || rep.Phases[0].Name != PhaseEdge {
		t.Fatalf("phases %+v, want the edge phase alone", rep.Phases)
	}
	p := rep.Phases[0]
	if p.Error != "" || p.Errors != 0 {
		t.Fatalf("edge: %d error(s): %s", p.Errors, p.Error)
	}
	if p.Raw == nil || p.Edge == nil {
		t.Fatalf("edge row without its raw side or figures: %+v", p)
	}
	t.Logf("esjet %+v raw %+v ratio %.2f edge %+v", p.Esjet, *p.Raw, p.Ratio, *p.Edge)
	if p.Esjet.Ops != count || p.Raw.Ops != count || p.Esjet.OpsPerSec <= 0 || p.Raw.OpsPerSec <= 0 || p.Ratio <= 0 {
		t.Errorf("esjet %+v raw %+v ratio %g: want %d decisions caught up on each side", p.Esjet, p.Raw, p.Ratio, count)
	}
	note := "edge (one catch-up a side, raw first): a hub caught up"
	if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.HasPrefix(n, note) }) {
		t.Errorf("no edge note in %q", rep.Notes)
	}
	if ed := p.Edge; ed.Decisions != count || ed.SiteBytes == 0 || ed.WallSecs < ed.CatchUpSecs || ed.RawWallSecs < ed.RawCatchUpSecs || ed.ResumeSecs < 0 || ed.RawResumeSecs < 0 {
		t.Errorf("edge figures %+v: want %d decisions, the catch-up inside the wall time", p.Edge, count)
	}
}

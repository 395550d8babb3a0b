package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet/config"
)

// TestE2EPhaseSaysWhereAStepsTimeGoes runs the e2e phase small under sync
// always (group commit on: the server stamps a batched message when it
// stages it), once per worker count of a sweep — the second count reuses
// the first's aggregate ids, so its steps' subjects already hold two
// decisions — and checks the breakdown: every step sampled and found, no
// hop negative (one clock: the server is embedded; each later write is
// staged only after the earlier one committed), and each hop's p50 at most
// the round trip's p90.
func TestE2EPhaseSaysWhereAStepsTimeGoes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	cfg := config.Default()
	cfg.Namespace = "hopstest"
	const count = 200
	rep, err := Run(t.Context(), Options{Config: cfg, Count: count, Sweep: []int{1, 8}, Phases: []string{PhaseE2E}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Phases) != 2 {
		t.Fatalf("%d phases, want e2e ×1 and ×8: %+v", len(rep.Phases), rep.Phases)
	}
	for _, p := range rep.Phases {
		label := phaseLabel(p)
		if p.Error != "" || p.Errors != 0 || p.Esjet.Ops != count {
			t.Errorf("%s: %d op(s), %d error(s): %s", label, p.Esjet.Ops, p.Errors, p.Error)
		}
		h := p.Hops
		if h == nil {
			t.Errorf("%s: no breakdown", label)
			continue
		}
		if h.Steps != count || h.Missing != 0 {
			t.Errorf("%s: %d step(s) sampled, %d missing; want all %d found", label, h.Steps, h.Missing, count)
		}
		if h.RoundTrip.P50MS <= 0 || h.RoundTrip.P90MS < h.RoundTrip.P50MS {
			t.Errorf("%s: round trip %+v", label, h.RoundTrip)
		}
		for _, x := range h.inOrder() {
			if x.hop.P50MS < 0 || x.hop.P90MS < x.hop.P50MS || x.hop.Negative != 0 {
				t.Errorf("%s: %s %+v: want p50 ≥ 0, p90 ≥ p50, no negative step", label, x.name, x.hop)
			}
			if x.hop.P50MS > h.RoundTrip.P90MS {
				t.Errorf("%s: %s p50 %.2fms is over the round trip's p90 %.2fms", label, x.name, x.hop.P50MS, h.RoundTrip.P90MS)
			}
		}
		want := label + ": where a step's time goes"
		if !containsPrefix(rep.Notes, want) {
			t.Errorf("no note starting %q in %q", want, rep.Notes)
		}
	}
}

func containsPrefix(notes []string, prefix string) bool {
	for _, n := range notes {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// TestHopSampleIsFourRunsSpreadOverThePhase: a phase of more steps than
// the sample holds is read as four runs of consecutive steps, in decision
// order, the first at the phase's start and the last at its end; a
// smaller one is read whole.
func TestHopSampleIsFourRunsSpreadOverThePhase(t *testing.T) {
	for _, n := range []int{0, 1, hopBlocks * hopBlock, hopBlocks*hopBlock + 1, 12_345} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			steps := make([]*step, n)
			for i := range steps {
				// Workers finish out of decision order.
				steps[i] = &step{decision: uint64((i*7919)%n + 1), seen: time.Unix(int64(i), 0)}
			}
			runs := sample(steps)
			total := 0
			var prev uint64
			for _, run := range runs {
				total += len(run)
				for _, s := range run {
					if s.decision <= prev {
						t.Fatalf("decision %d after %d: not consecutive in decision order", s.decision, prev)
					}
					prev = s.decision
				}
				if run[len(run)-1].decision-run[0].decision != uint64(len(run)-1) {
					t.Errorf("a run from decision %d to %d holds %d steps: not consecutive", run[0].decision, run[len(run)-1].decision, len(run))
				}
			}
			switch {
			case n == 0:
				if len(runs) != 0 {
					t.Errorf("%d runs of no steps", len(runs))
				}
			case n <= hopBlocks*hopBlock:
				if len(runs) != 1 || total != n {
					t.Errorf("%d runs, %d steps: want the %d steps whole", len(runs), total, n)
				}
			default:
				if len(runs) != hopBlocks || total != hopBlocks*hopBlock || runs[0][0].decision != 1 || prev != uint64(n) {
					t.Errorf("%d runs, %d steps, from %d to %d: want %d runs of %d from 1 to %d", len(runs), total, runs[0][0].decision, prev, hopBlocks, hopBlock, n)
				}
			}
		})
	}
}

package bench

import (
	"context"
	"sync/atomic"
	"time"
)

// plan is how a paired phase splits its work into interleaved rounds.
type plan struct {
	rounds int
	ops    []int         // count mode: operations per round per side
	slice  time.Duration // duration mode: time per round per side
}

// planFor splits the phase's budget: in count mode up to 4 rounds of
// count/4 per side, in duration mode rounds of `slice` per side.
func (e *env) planFor(sides int) plan {
	if c := e.opts.Count; c > 0 {
		rounds := min(4, max(1, c/50))
		p := plan{rounds: rounds}
		for i := range rounds {
			p.ops = append(p.ops, c/rounds+btoi(i < c%rounds))
		}
		return p
	}
	per := e.opts.Duration / time.Duration(sides)
	rounds := max(1, int(per/slice))
	return plan{rounds: rounds, slice: per / time.Duration(rounds)}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// spec is the run spec of round i of a side.
func (p plan) spec(i, workers int, rate float64, classify func(error) Outcome, done *atomic.Int64) Spec {
	s := Spec{Workers: workers, Rate: rate, Classify: classify, Done: done}
	if p.ops != nil {
		s.Ops = p.ops[i]
	} else {
		s.For = p.slice
		if rate > 0 {
			// The due times restart each round: split the rate's
			// operations evenly instead of cutting a round mid-schedule.
			s.Ops = max(1, int(rate*p.slice.Seconds()))
		}
	}
	return s
}

// interleave runs rounds of each side in turn, rotating which goes first,
// and returns each side's accumulated result.
func interleave(ctx context.Context, p plan, progress func(float64), sides ...func(ctx context.Context, round int) Result) []Result {
	out := make([]Result, len(sides))
	for i := range p.rounds {
		for j := range sides {
			k := (i + j) % len(sides)
			if ctx.Err() != nil {
				return out
			}
			out[k].Add(sides[k](ctx, i))
			progress(float64(i*len(sides)+j+1) / float64(p.rounds*len(sides)))
		}
	}
	return out
}

// ticker calls progress with f() every 200 ms until the returned stop.
func ticker(progress func(float64), f func() float64) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				progress(min(f(), 1))
			}
		}
	}()
	return func() { close(done) }
}

// picked wraps an operation on aggregate a: each worker picks with its own
// seeded picker (the same seeds on both sides, so both see the same
// sequence of aggregates), and a pick of an aggregate that already has an
// operation in flight counts as a wait.
func (e *env) picked(op func(ctx context.Context, a int) error) (Op, error) {
	pickers := make([]Picker, e.opts.Workers)
	for w := range pickers {
		p, err := NewPicker(e.opts.Skew, len(e.ids), uint64(w)+1)
		if err != nil {
			return nil, err
		}
		pickers[w] = p
	}
	inflight := make([]atomic.Int32, len(e.ids))
	return func(ctx context.Context, w int) (bool, error) {
		a := pickers[w].Pick()
		waited := inflight[a].Add(1) > 1
		defer inflight[a].Add(-1)
		return waited, op(ctx, a)
	}, nil
}

// sweep returns an op that visits aggregates 0, 1, … once each (warm-up:
// every aggregate exists and is cached before timing).
func sweep(op func(ctx context.Context, a int) error) Op {
	var next atomic.Int64
	return func(ctx context.Context, w int) (bool, error) {
		return false, op(ctx, int(next.Add(1)-1))
	}
}

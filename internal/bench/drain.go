package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/esjet/esjet/internal/bench/raw"
)

// The drain phases (relay, effects, replay) measure a batch being worked
// through rather than single operations: each round fills a batch untimed,
// then esjet and raw each drain one, esjet first in even rounds and raw
// first in odd ones (raw.Pair). They report throughput only.

// drain times one round's two sides, n operations each (raw.Pair.Round).
type drain func(n int, esjet, rawSide raw.Side) error

// drainPhase runs the rounds (drainRounds), each of which fills its batch
// and hands its two sides to pair, and returns the phase with both sides'
// totals. A failing round ends the phase with its error; the rounds before
// it still count.
func (e *env) drainPhase(ctx context.Context, progress func(float64), name, unit string,
	round func(i int, pair drain) error) []Phase {
	var p raw.Pair
	pair := func(n int, esjet, rawSide raw.Side) error { return p.Round(n, esjet, rawSide) }
	err := e.drainRounds(ctx, progress, func(i int) error { return round(i, pair) })
	es := Result{Ops: p.Esjet.Ops, Elapsed: p.Esjet.Elapsed}
	rw := Result{Ops: p.Raw.Ops, Elapsed: p.Raw.Elapsed}
	ph := Phase{Name: name, Description: describe[name], Unit: unit}
	ph.pair(&es, &rw)
	if err != nil {
		ph.Error = err.Error()
	}
	return []Phase{ph}
}

// drainRounds runs round(i) until the phase's time is spent (set-up
// included, at least one round, at most 8), or once in count mode.
func (e *env) drainRounds(ctx context.Context, progress func(float64), round func(i int) error) error {
	start := time.Now()
	// Round numbers go on across the phases of a --workers sweep: each
	// round names its own kind or namespace after its number.
	next := func() int { e.drained++; return e.drained - 1 }
	if e.opts.Count > 0 {
		return round(next())
	}
	stop := ticker(progress, func() float64 { return float64(time.Since(start)) / float64(e.opts.Duration) })
	defer stop()
	for i := 0; i < 8 && (i == 0 || time.Since(start) < e.opts.Duration); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := round(next()); err != nil {
			return err
		}
	}
	return nil
}

// drainSize is how many decisions or commands one round fills.
func (e *env) drainSize() int {
	if e.opts.Count > 0 {
		return e.opts.Count
	}
	return drainBatch
}

// runUntil runs a component's Run until done holds and returns the time
// from start (taken before the component was built) until then; stopping
// the component is not timed.
func runUntil(ctx context.Context, start time.Time, what string, run func(context.Context) error,
	progress func() int64, done func() bool) (time.Duration, error) {
	rctx, cancel := context.WithCancel(ctx)
	exited := make(chan error, 1)
	go func() { exited <- run(rctx) }()
	err := waitFor(ctx, what, exited, progress, done)
	elapsed := time.Since(start)
	cancel()
	<-exited
	return elapsed, err
}

// waitFor polls done every millisecond until it holds. It fails when ctx
// ends, when the component stops by itself (what it returned is put back
// on exited), or after 30s without progress.
func waitFor(ctx context.Context, what string, exited chan error, progress func() int64, done func() bool) error {
	const stall = 30 * time.Second
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	last, since := progress(), time.Now()
	for !done() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-exited:
			exited <- err
			if err == nil {
				return fmt.Errorf("%s stopped before it was done", what)
			}
			return fmt.Errorf("%s stopped before it was done: %w", what, err)
		case <-tick.C:
		}
		if p := progress(); p != last {
			last, since = p, time.Now()
		} else if time.Since(since) > stall {
			return fmt.Errorf("%s: no progress for %s", what, stall)
		}
	}
	return nil
}

package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Clock is the time source of a run; tests use a fake one.
type Clock interface {
	Now() time.Time
	// SleepUntil returns at t or when ctx ends, whichever is first.
	SleepUntil(ctx context.Context, t time.Time)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) SleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

// Outcome classifies an operation's result.
type Outcome int

const (
	OK       Outcome = iota
	Conflict         // a version conflict the caller would see (HTTP 409)
	Failed           // any other error
)

// Op is one operation by worker w. It returns whether it had to wait for
// another operation on the same aggregate, and its error.
type Op func(ctx context.Context, w int) (waited bool, err error)

// Spec says how much to run and how.
type Spec struct {
	Workers int
	// Ops stops after that many operations (0: no limit).
	Ops int
	// For stops issuing operations after that long (0: no limit). At
	// least one of Ops and For must be set.
	For time.Duration
	// Rate, when > 0, is a fixed arrival rate (operations per second):
	// operation i is due at start + i/Rate and its latency is measured from
	// that due time, so a slow system's queueing shows in the latency
	// instead of being hidden by a sender that waits (no coordinated
	// omission). 0: closed loop, each worker sends as soon as its last
	// operation finished, latency from the send.
	Rate float64
	// Classify maps an error to Conflict or Failed (nil: Failed).
	Classify func(error) Outcome
	// Done, when set, is incremented per finished operation (progress).
	Done  *atomic.Int64
	Clock Clock
}

// Result is what a run measured.
type Result struct {
	Ops       int64         // operations finished without error
	Conflicts int64         // operations that ended in a conflict
	Errors    int64         // operations that failed otherwise
	Waits     int64         // operations that waited for another on the same aggregate
	Elapsed   time.Duration // from the start to the last operation's end
	Latency   Recorder      // of the successful operations
	FirstErr  error
}

// Add accumulates o into r (rounds of one side of a phase).
func (r *Result) Add(o Result) {
	r.Ops += o.Ops
	r.Conflicts += o.Conflicts
	r.Errors += o.Errors
	r.Waits += o.Waits
	r.Elapsed += o.Elapsed
	r.Latency.Merge(&o.Latency)
	if r.FirstErr == nil {
		r.FirstErr = o.FirstErr
	}
}

// Due is the schedule of a fixed-rate run: when operation i is due.
func Due(start time.Time, rate float64, i int64) time.Time {
	return start.Add(time.Duration(float64(i) * float64(time.Second) / rate))
}

// RunOps runs op with spec.Workers workers taking tickets from one counter
// until spec.Ops operations were issued or spec.For has passed, and waits
// for the operations in flight.
func RunOps(ctx context.Context, spec Spec, op Op) Result {
	clock := spec.Clock
	if clock == nil {
		clock = realClock{}
	}
	workers := max(spec.Workers, 1)
	start := clock.Now()
	var end time.Time
	if spec.For > 0 {
		end = start.Add(spec.For)
	}
	var tickets atomic.Int64
	type part struct {
		Result           // Elapsed unused: the run's is from start to the last end
		last   time.Time // when its last operation ended
	}
	parts := make([]part, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			p := &parts[w]
			for ctx.Err() == nil {
				i := tickets.Add(1) - 1
				if spec.Ops > 0 && i >= int64(spec.Ops) {
					return
				}
				var due time.Time
				if spec.Rate > 0 {
					due = Due(start, spec.Rate, i)
					if !end.IsZero() && !due.Before(end) {
						return
					}
					clock.SleepUntil(ctx, due)
					if ctx.Err() != nil {
						return
					}
				} else {
					due = clock.Now()
					if !end.IsZero() && !due.Before(end) {
						return
					}
				}
				waited, err := op(ctx, w)
				done := clock.Now()
				p.last = done
				if waited {
					p.Waits++
				}
				switch {
				case err == nil:
					p.Ops++
					p.Latency.Add(done.Sub(due))
				case spec.Classify != nil && spec.Classify(err) == Conflict:
					p.Conflicts++
				default:
					p.Errors++
					if p.FirstErr == nil {
						p.FirstErr = err
					}
				}
				if spec.Done != nil {
					spec.Done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	var r Result
	last := start
	for i := range parts {
		p := &parts[i]
		r.Add(p.Result)
		if p.last.After(last) {
			last = p.last
		}
	}
	r.Elapsed = last.Sub(start)
	return r
}

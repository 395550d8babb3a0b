package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/bench/raw"
	"github.com/esjet/esjet/internal/projection"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// The project phase: a projection with a no-op handler catching up from
// scratch over the whole event log (topped up to replayMin decisions, as
// the replay phase does) — ordered consumer, decoding every decision, the
// handler per event, checkpoints stored as it goes — beside raw.Read, an
// ordered consumer touching only the bytes of the same stream, in the
// same rounds. Each round's projection is new (its own name and bucket),
// so it reads everything; the bucket is deleted after the round.

func (e *env) projectPhase(ctx context.Context, progress func(float64)) ([]Phase, error) {
	names := streams.NamesFor(e.ns)
	total, last, err := e.fillLog(ctx)
	if err != nil {
		return nil, err
	}
	noop := func(context.Context, *projection.Tx, projection.Event) error { return nil }
	return e.drainPhase(ctx, progress, PhaseProject, "decision", func(i int, pair drain) error {
		name := "bench_project_" + strconv.Itoa(i)
		esjet := raw.Timed(func() error {
			return e.catchUp(ctx, projection.Definition{Name: name, Handle: noop}, last)
		})
		rawRead := raw.Timed(func() error {
			n, err := raw.Read(ctx, e.nodeJS, names.Events, names.EventsFilter(), last)
			if err == nil && n != total {
				err = fmt.Errorf("read %d messages, want %d", n, total)
			}
			return err
		})
		err := pair(total, esjet, rawRead)
		_ = e.nodeJS.DeleteKeyValue(context.WithoutCancel(ctx), projection.ViewBucket(e.ns, name, 1))
		return err
	}), nil
}

// fillLog tops the log up to replayMin decisions and returns how many
// messages it holds and its last sequence.
func (e *env) fillLog(ctx context.Context) (int, uint64, error) {
	st, err := e.nodeJS.Stream(ctx, streams.NamesFor(e.ns).Events)
	if err != nil {
		return 0, 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, 0, err
	}
	if have := int(info.State.Msgs); have < replayMin {
		if err := e.topUp(ctx, replayMin-have); err != nil {
			return 0, 0, err
		}
		if info, err = st.Info(ctx); err != nil {
			return 0, 0, err
		}
	}
	return int(info.State.Msgs), info.State.LastSeq, nil
}

// catchUp runs def until its checkpoint stands at the end of sequence last.
func (e *env) catchUp(ctx context.Context, def projection.Definition, last uint64) error {
	r, err := projection.NewRunner(ctx, e.nodeJS, e.node.Log(), []projection.Definition{def},
		projection.Config{Heartbeat: 50 * time.Millisecond}, nil)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() { cancel(); <-done }()
	end := wire.EndOfSeq(last)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		for _, p := range r.Progress() {
			if p.Position >= end {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("projection %s did not catch up with seq %d in 5 minutes", def.Name, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// topUp appends n deposits across the run's aggregates.
func (e *env) topUp(ctx context.Context, n int) error {
	res := RunOps(ctx, Spec{Workers: e.opts.Workers, Ops: n}, sweep(func(ctx context.Context, i int) error {
		_, err := e.node.API().Send(ctx, "acct", "p"+strconv.Itoa(i%max(len(e.ids), 1)), "deposit", depositBody, api.Meta{})
		return err
	}))
	if res.Errors > 0 {
		return fmt.Errorf("fill: %w", res.FirstErr)
	}
	return nil
}

package bench

import (
	"context"
	"fmt"
	"strconv"

	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/bench/raw"
	"github.com/esjet/esjet/internal/streams"
)

// The replay phase: the whole event log (topped up to replayMin decisions
// first) read by Log.ReadFrom, decoding every decision, beside raw.Read, an
// ordered consumer touching only the bytes.

func (e *env) replayPhase(ctx context.Context, progress func(float64)) ([]Phase, error) {
	names := streams.NamesFor(e.ns)
	st, err := e.nodeJS.Stream(ctx, names.Events)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, err
	}
	if have := int(info.State.Msgs); have < replayMin {
		res := RunOps(ctx, Spec{Workers: e.opts.Workers, Ops: replayMin - have}, sweep(func(ctx context.Context, i int) error {
			_, err := e.node.API().Send(ctx, "acct", "p"+strconv.Itoa(i%max(len(e.ids), 1)), "deposit", depositBody, api.Meta{})
			return err
		}))
		if res.Errors > 0 {
			return nil, fmt.Errorf("fill: %w", res.FirstErr)
		}
		if info, err = st.Info(ctx); err != nil {
			return nil, err
		}
	}
	total := int(info.State.Msgs)
	last := info.State.LastSeq
	esjet := raw.Timed(func() error {
		recs, err := e.node.Log().ReadFrom(ctx, 1, total)
		if err == nil && len(recs) != total {
			err = fmt.Errorf("read %d decisions, want %d", len(recs), total)
		}
		return err
	})
	rawRead := raw.Timed(func() error {
		n, err := raw.Read(ctx, e.nodeJS, names.Events, names.EventsFilter(), last)
		if err == nil && n != total {
			err = fmt.Errorf("read %d messages, want %d", n, total)
		}
		return err
	})
	return e.drainPhase(ctx, progress, PhaseReplay, "decision", func(i int, pair drain) error {
		return pair(total, esjet, rawRead)
	}), nil
}

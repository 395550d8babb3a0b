package aggregate

import (
	"context"
	"time"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// The repository's figures for internal/telemetry: how long Decide and the
// append to EVENTS take. The counters (cache hits, conflicts, snapshots)
// are read from [Repository.Stats] when Prometheus scrapes.

// decide runs the aggregate's Decide for q on e's state, timed.
func (r *Repository) decide(q *call, e *entry) (Decision, error) {
	start := time.Now()
	dec, err := q.def.Decide(e.state, q.req.Kind, q.req.Payload)
	r.cfg.Telemetry.Decided(q.req.Type, time.Since(start))
	return dec, err
}

// append appends d to aggregate a at pos, timed.
func (r *Repository) append(ctx context.Context, a wire.AggregateRef, d streams.Decision, pos streams.Position) (streams.Record, error) {
	start := time.Now()
	rec, err := r.log.AppendTo(ctx, a, d, pos)
	r.cfg.Telemetry.Appended(time.Since(start))
	return rec, err
}

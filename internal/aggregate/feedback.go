package aggregate

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/esjet/esjet/internal/telemetry"
	"github.com/esjet/esjet/internal/wire"
)

// Feedback is how a worker's report of a command's outcome reaches the
// aggregate that issued the command (internal/consumer's Feedback): on the
// repository's outcome path ([Repository.HandleOutcome]), which no API
// reaches, so the framework accepts it only for a command the aggregate
// issued and still awaits. Whether a refusal is final is this package's
// rule ([IsPermanent]): such an error wraps [wire.ErrReportRefused], and
// the worker records it and acks. An edge hub's workers report elsewhere
// (internal/node); a site applies the hub's reports here.
//
// It is safe for concurrent use.
type Feedback struct {
	repo   *Repository
	status func(error) int
}

// Feedback returns the repository's side of the workers' feedback. status
// is the status an error is answered with on the API (the one table of
// internal/api): an outcome is counted in the commands metric like any
// command, with the result that status names ([telemetry.ResultOf]); nil
// counts every error as a server error.
func (r *Repository) Feedback(status func(error) int) Feedback {
	return Feedback{repo: r, status: status}
}

// Report hands rep to its aggregate under a span that is the child of the
// worker's (in ctx, or rep.TraceParent when the report travelled without
// it), so the outcome decision and what it issues stay in the saga's trace.
// Errors: those of [Repository.HandleOutcome]; a permanent one
// ([IsPermanent]) wrapped in [wire.ErrReportRefused].
func (f Feedback) Report(ctx context.Context, rep wire.Report) error {
	start := time.Now()
	tel := f.repo.cfg.Telemetry
	typ, kind := telemetry.Unknown, telemetry.Unknown
	if def, err := f.repo.reg.Get(rep.AggregateType); err == nil {
		typ = rep.AggregateType
		if slices.Contains(def.Outcomes(), rep.Kind) {
			kind = rep.Kind
		}
	}
	ctx, sp := tel.StartOutcome(ctx, typ, kind, rep.TraceParent)
	res, err := f.repo.HandleOutcome(ctx, Request{
		Type: rep.AggregateType, ID: rep.AggregateID, Kind: rep.Kind, Payload: rep.Payload,
		IdempotencyKey: rep.IdempotencyKey, CorrelationID: rep.CorrelationID, CausationID: rep.CausationID,
		TraceParent: sp.TraceParent(),
	})
	status := f.statusOf(err)
	tel.CommandDone(typ, kind, telemetry.ResultOf(status, res.Replayed), time.Since(start))
	if status >= 500 {
		sp.End(err)
	} else {
		sp.End(nil)
	}
	if IsPermanent(err) {
		return fmt.Errorf("%w: %w", wire.ErrReportRefused, err)
	}
	return err
}

func (f Feedback) statusOf(err error) int {
	switch {
	case err == nil:
		return 200
	case f.status == nil:
		return 500
	}
	return f.status(err)
}

package streams

import (
	"context"
	"errors"
	"fmt"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxMulti is the most decisions one [Log.AppendAll] stores (JetStream
// allows 1,000 messages in an atomic batch; a transaction over more
// aggregates than this is a sign of a missing aggregate boundary).
const MaxMulti = 100

// AppendAll stores ds atomically, decision i on its aggregate's subject
// expecting the aggregate at afters[i]: all of them, or none. It is one
// JetStream atomic batch, so it costs one batch (~2.3 ms on a single
// file-backed server: it is staged in a store of its own) whatever the number of aggregates.
//
// Errors:
//   - what [Log.Append] returns for bad input, naming the decision, and
//     [ErrInvalidDecision] for no decisions, more than [MaxMulti], or one
//     aggregate twice: nothing was written;
//   - a [*ConflictError] for the first aggregate not at its expected
//     position (its Subject names it): nothing was written;
//   - [ErrDuplicateDecisionID] when a decision id is already stored
//     elsewhere inside the dedup window;
//   - [ErrUnknownOutcome] when every attempt timed out and the log does not
//     show the decisions; calling AppendAll again with the same ids
//     resolves it.
//
// AppendAll is idempotent by the decision ids: a retry of a batch that was
// stored returns the original records and stores nothing twice.
//
// AppendAll validates each decision's aggregate type and id;
// [Log.AppendAllTo] takes aggregates validated where the request came in.
func (l *Log) AppendAll(ctx context.Context, ds []Decision, afters []Position) ([]Record, error) {
	as := make([]wire.AggregateRef, len(ds))
	for i, d := range ds {
		a, err := wire.NewAggregateRef(d.AggregateType, d.AggregateID)
		if err != nil {
			return nil, fmt.Errorf("decision %d (%s/%s): %w", i, d.AggregateType, d.AggregateID, err)
		}
		as[i] = a
	}
	return l.AppendAllTo(ctx, as, ds, afters)
}

// AppendAllTo is [Log.AppendAll] of each ds[i] to aggregate as[i]: its
// aggregate type and id are as[i]'s.
func (l *Log) AppendAllTo(ctx context.Context, as []wire.AggregateRef, ds []Decision, afters []Position) ([]Record, error) {
	switch {
	case len(ds) == 0:
		return nil, invalid("a multi-aggregate append needs at least one decision")
	case len(ds) != len(afters), len(ds) != len(as):
		return nil, invalid("%d decisions but %d expected positions and %d aggregates", len(ds), len(afters), len(as))
	case len(ds) > MaxMulti:
		return nil, invalid("%d decisions in one multi-aggregate append, more than %d; split the work", len(ds), MaxMulti)
	}
	msgs := make([]*nats.Msg, len(ds))
	subjects := make([]string, len(ds))
	seen := make(map[string]bool, len(ds))
	for i := range ds {
		d, subject, msg, err := l.build(as[i], ds[i], afters[i])
		if err != nil {
			return nil, fmt.Errorf("decision %d (%s/%s): %w", i, ds[i].AggregateType, ds[i].AggregateID, err)
		}
		if seen[subject] {
			return nil, invalid("%s/%s appears twice in one multi-aggregate append; put both changes in one decision", d.AggregateType, d.AggregateID)
		}
		seen[subject] = true
		ds[i], subjects[i], msgs[i] = d, subject, msg
	}
	var lastErr error
	for attempt := 1; attempt <= l.cfg.AppendAttempts; attempt++ {
		actx, cancel := context.WithTimeout(ctx, l.cfg.AppendTimeout)
		ack, err := sendBatch(actx, l.js.Conn(), msgs)
		cancel()
		var apiErr *jetstream.APIError
		switch {
		case err == nil:
			first := ack.Sequence - uint64(len(ds)) + 1
			recs := make([]Record, len(ds))
			for i := range ds {
				recs[i] = Record{Decision: ds[i], Seq: first + uint64(i), Subject: subjects[i]}
			}
			return recs, nil
		case isConflict(err) || (errors.As(err, &apiErr) && apiErr.ErrorCode == codeBatchDuplicate):
			return l.resolveAll(ctx, ds, subjects, afters, err)
		case isStorageFull(err):
			return nil, fmt.Errorf("append %d aggregates: %w: %w", len(ds), ErrStorageFull, err)
		case isTooLarge(err):
			return nil, fmt.Errorf("append %d aggregates: %w: %w", len(ds), ErrTooLarge, err)
		case ambiguous(ctx, err):
			lastErr = err
			l.logger.Warn("multi-aggregate append timed out; retrying with the same decision ids",
				"aggregates", len(ds), "decision_id", ds[0].ID, "attempt", attempt, "error", err)
			continue
		case ctx.Err() != nil:
			return nil, fmt.Errorf("append %d aggregates (first decision %s): %w: %w", len(ds), ds[0].ID, ErrUnknownOutcome, ctx.Err())
		default:
			return nil, fmt.Errorf("append %d aggregates: %w", len(ds), err)
		}
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.AppendTimeout)
	defer cancel()
	if recs, ok, err := l.committedAll(rctx, ds, subjects, afters); err == nil && ok {
		return recs, nil
	}
	return nil, fmt.Errorf("append %d aggregates (first decision %s): %w after %d attempts: %w",
		len(ds), ds[0].ID, ErrUnknownOutcome, l.cfg.AppendAttempts, lastErr)
}

// resolveAll decides a refused batch: stored before (a retry of a batch
// whose reply was lost), a stale aggregate, or a duplicate id.
func (l *Log) resolveAll(ctx context.Context, ds []Decision, subjects []string, afters []Position, cause error) ([]Record, error) {
	recs, ok, err := l.committedAll(ctx, ds, subjects, afters)
	if err != nil {
		return nil, fmt.Errorf("append %d aggregates: resolve refusal: %w", len(ds), err)
	}
	if ok {
		return recs, nil
	}
	for i, subject := range subjects {
		actual, err := l.lastPosition(ctx, subject)
		if err != nil {
			return nil, fmt.Errorf("append %d aggregates: read actual position of %s: %w", len(ds), subject, err)
		}
		if actual.Seq != afters[i].Seq {
			return nil, &ConflictError{Subject: subject, Expected: afters[i], Actual: actual, Err: cause}
		}
	}
	if isConflict(cause) {
		// Not expected: every aggregate stands where the batch expected it,
		// and the log only grows. Report the first.
		actual, _ := l.lastPosition(ctx, subjects[0])
		return nil, &ConflictError{Subject: subjects[0], Expected: afters[0], Actual: actual, Err: cause}
	}
	return nil, fmt.Errorf("append %d aggregates: %w: a decision id of the request is already stored: %w", len(ds), ErrDuplicateDecisionID, cause)
}

// committedAll reports whether the batch ds was stored: each decision
// right after its expected position.
func (l *Log) committedAll(ctx context.Context, ds []Decision, subjects []string, afters []Position) ([]Record, bool, error) {
	recs := make([]Record, len(ds))
	for i := range ds {
		rec, ok, err := l.findAfter(ctx, subjects[i], afters[i].Seq, ds[i].ID)
		if err != nil || !ok {
			return nil, false, err
		}
		recs[i] = rec
	}
	return recs, true, nil
}

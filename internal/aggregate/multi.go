package aggregate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// MultiRequest is one request of [Repository.HandleAll].
type MultiRequest struct {
	Request
	// ExpectedVersion, when set, is the version the aggregate must stand
	// at: if it does not, nothing of the request is appended and the
	// answer is a [*StaleError]. Unset, the command is decided on the
	// aggregate's current state (and decided again if it moves).
	ExpectedVersion *uint64
}

// StaleError names the aggregate of a multi-aggregate request that was
// not at the version the request expected. It wraps [ErrConflict].
type StaleError struct {
	Type, ID         string
	Expected, Actual uint64
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("%s/%s is at version %d, not the expected %d; nothing was appended to any aggregate of the request: read its state and send the request again",
		e.Type, e.ID, e.Actual, e.Expected)
}

func (e *StaleError) Unwrap() error { return ErrConflict }

// HandleAll decides each command against its aggregate and appends all the
// decisions atomically: all of them or none (one JetStream atomic batch).
// It is for the invariants a saga is too weak for — moving money between
// two accounts. The aggregates are locked in a fixed order for the whole
// call, and a conflict on any of them decides every command again.
//
// Errors: those of [Repository.Handle], naming the command; a
// [*StaleError] for an aggregate not at its ExpectedVersion;
// [ErrBadCommand] for no commands, more than [streams.MaxMulti], or one
// aggregate twice; [ErrKeyReused] when only some of the keyed commands had
// been handled before. With idempotency keys on every command a retry
// returns the first results.
func (r *Repository) HandleAll(ctx context.Context, cmds []MultiRequest) ([]Result, error) {
	if len(cmds) == 0 || len(cmds) > streams.MaxMulti {
		return nil, fmt.Errorf("%w: a multi-aggregate request takes 1 to %d commands, got %d", ErrBadCommand, streams.MaxMulti, len(cmds))
	}
	qs := make([]*call, len(cmds))
	for i, c := range cmds {
		q, err := r.newCall(c.Request)
		if err == nil {
			err = r.cfg.Sites.check(c.Type, c.ID)
		}
		if err != nil {
			return nil, fmt.Errorf("command %d (%s/%s %s): %w", i, c.Type, c.ID, c.Kind, err)
		}
		for _, p := range qs[:i] {
			if p.key == q.key {
				return nil, fmt.Errorf("%w: %s appears twice in one multi-aggregate request; send one command per aggregate", ErrBadCommand, q.key)
			}
		}
		qs[i] = q
	}
	defer r.lockAll(qs)()
	es := make([]*entry, len(qs))
	checked := make([]bool, len(qs)) // the tail was read since the cache
	for i, q := range qs {
		e, loaded, err := r.get(ctx, q.def, q.agg)
		if err != nil {
			return nil, err
		}
		es[i], checked[i] = e, loaded
	}
	for attempt := 0; ; attempt++ {
		if res, ok, err := r.answeredAll(ctx, qs, es); ok || err != nil {
			return res, err
		}
		decs, again, err := r.decideAll(ctx, cmds, qs, es, checked)
		if err != nil || again {
			if err != nil {
				return nil, err
			}
			continue
		}
		res, again, err := r.commitAll(ctx, cmds, qs, es, decs, attempt)
		if again {
			continue
		}
		return res, err
	}
}

// lockAll locks the stripes of qs's aggregates in index order (so two
// requests over the same aggregates cannot deadlock) and returns the
// unlock.
func (r *Repository) lockAll(qs []*call) func() {
	var idx []int
	for _, q := range qs {
		if i := r.locks.index(q.key); !slices.Contains(idx, i) {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	mus := make([]*sync.Mutex, len(idx))
	for n, i := range idx {
		mus[n] = &r.locks[i]
		mus[n].Lock()
	}
	return func() {
		for _, mu := range slices.Backward(mus) {
			mu.Unlock()
		}
	}
}

// answeredAll answers a retried request from the log: every keyed command
// already handled. Some handled and some not cannot come from one request.
func (r *Repository) answeredAll(ctx context.Context, qs []*call, es []*entry) ([]Result, bool, error) {
	var res []Result
	for i, q := range qs {
		one, ok, err := r.answered(ctx, q, es[i])
		if err != nil {
			return nil, false, err
		}
		if ok {
			res = append(res, one)
		}
	}
	switch {
	case len(res) == 0:
		return nil, false, nil
	case len(res) < len(qs):
		return nil, false, fmt.Errorf("%w: %d of the %d commands' keys were already used by an earlier request; give each request its own keys", ErrKeyReused, len(res), len(qs))
	}
	return res, true, nil
}

// decideAll checks the expected versions and decides every command. again
// is true when a stale cache was found and refreshed: start over.
func (r *Repository) decideAll(ctx context.Context, cmds []MultiRequest, qs []*call, es []*entry, checked []bool) (decs []Decision, again bool, _ error) {
	decs = make([]Decision, len(qs))
	for i, q := range qs {
		e := es[i]
		want := cmds[i].ExpectedVersion
		if e.archived() && q.def.archived == ArchivedRefuse {
			return nil, false, fmt.Errorf("command %d: %w: %s/%s was archived at seq %d", i, ErrArchived, q.req.Type, q.req.ID, e.archivedSeq)
		}
		dec, err := q.def.Decide(e.state, q.req.Kind, q.req.Payload)
		if !checked[i] && (appendsNothing(dec, err) || err != nil || (want != nil && *want != e.pos.Version)) {
			// No expectation would catch a stale cache here: read the tail
			// once before answering.
			checked[i] = true
			moved, rerr := r.tailMoved(ctx, q, e)
			if rerr != nil {
				return nil, false, rerr
			}
			if moved {
				return nil, true, nil
			}
		}
		if want != nil && *want != e.pos.Version {
			return nil, false, &StaleError{Type: q.req.Type, ID: q.req.ID, Expected: *want, Actual: e.pos.Version}
		}
		if err != nil {
			return nil, false, fmt.Errorf("command %d (%s/%s %s): %w", i, q.req.Type, q.req.ID, q.req.Kind, err)
		}
		if len(dec.Events) == 0 && len(dec.Commands) > 0 {
			return nil, false, fmt.Errorf("%w: %s.%s issued %d command(s) without recording an event", ErrInvalidDecision, q.req.Type, q.req.Kind, len(dec.Commands))
		}
		decs[i] = dec
	}
	return decs, false, nil
}

// commitAll appends the decisions that record events as one atomic batch
// and settles every result. again is true after a conflict that left the
// stale aggregate refreshed.
func (r *Repository) commitAll(ctx context.Context, cmds []MultiRequest, qs []*call, es []*entry, decs []Decision, attempt int) (_ []Result, again bool, _ error) {
	var (
		sds    []streams.Decision
		aggs   []wire.AggregateRef
		afters []streams.Position
		at     []int // request index of each appended decision
	)
	for i, q := range qs {
		if len(decs[i].Events) == 0 {
			continue
		}
		sd, err := toStreams(q.req, q.decisionID, q.digest, decs[i])
		if err == nil {
			err = q.def.stamp(&sd)
		}
		if err != nil {
			return nil, false, err
		}
		sds, aggs, afters, at = append(sds, sd), append(aggs, q.agg), append(afters, es[i].pos), append(at, i)
	}
	res := make([]Result, len(qs))
	if len(sds) > 0 {
		sealed, err := r.sealAll(ctx, sds, decs, at)
		if err != nil {
			return nil, false, err
		}
		recs, err := r.log.AppendAllTo(ctx, aggs, sealed, afters)
		var conflict *streams.ConflictError
		switch {
		case errors.As(err, &conflict):
			again, err := r.conflictAll(ctx, cmds, qs, es, conflict, attempt)
			return nil, again, err
		case err != nil:
			for _, q := range qs {
				r.cache.remove(q.key)
			}
			if errors.Is(err, streams.ErrTooLarge) {
				return nil, false, fmt.Errorf("%w: %w", ErrTooLarge, err)
			}
			return nil, false, fmt.Errorf("handle %d commands: %w", len(qs), err)
		}
		for n, rec := range recs {
			i := at[n]
			if res[i], err = r.settle(ctx, qs[i], es[i], plain(rec, sds[n])); err != nil {
				return nil, false, err
			}
		}
	}
	for i, q := range qs {
		if len(decs[i].Events) == 0 { // a no-op: decideAll refused commands without events
			res[i], _ = r.nothingToAppend(q, es[i], decs[i])
		}
	}
	return res, false, nil
}

// conflictAll refreshes the aggregate a conflict names and says whether to
// decide again (nil error): not when it had an expected version or the
// retries are spent.
func (r *Repository) conflictAll(ctx context.Context, cmds []MultiRequest, qs []*call, es []*entry, conflict *streams.ConflictError, attempt int) (again bool, _ error) {
	r.stats.conflicts.Add(1)
	i := slices.IndexFunc(qs, func(q *call) bool {
		s := r.log.Names().SubjectOf(q.agg)
		return s == conflict.Subject
	})
	if i < 0 {
		return false, fmt.Errorf("handle %d commands: %w", len(qs), conflict)
	}
	q, e := qs[i], es[i]
	if err := r.refresh(ctx, q.def, q.agg, e, conflict.Actual.Seq); err != nil {
		r.cache.remove(q.key)
		return false, err
	}
	if want := cmds[i].ExpectedVersion; want != nil && *want != e.pos.Version {
		return false, &StaleError{Type: q.req.Type, ID: q.req.ID, Expected: *want, Actual: e.pos.Version}
	}
	if attempt >= r.cfg.ConflictRetries {
		return false, fmt.Errorf("%w: %s changed %d times while deciding a multi-aggregate request; retry later", ErrConflict, q.key, attempt+1)
	}
	if err := sleepJitter(ctx, attempt); err != nil {
		return false, err
	}
	return true, nil
}

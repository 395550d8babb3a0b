package aggregate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/esjet/esjet/internal/failpoint"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// call is one [Request] on its way through [Repository.Handle]: what was
// asked, of which definition, and the identity its decision will have.
type call struct {
	req        Request
	agg        wire.AggregateRef // req's aggregate, validated once: the layers below take it as it is
	def        *Definition
	key        string // cache and lock key: <type>/<id>
	decisionID string
	digest     string // of kind + payload when keyed, else ""
	// outcome is set for an outcome on its way through HandleOutcome.
	outcome *outcomeCall
	// gen is the cache's generation when the request loaded its state.
	gen uint64
}

// Handle decides req against the aggregate's current state and appends the
// decision. Errors: [ErrUnknownType], [ErrUnknownCommand], [ErrBadCommand],
// a [*Rejection] (wraps [ErrRejected]), [ErrKeyReused], [ErrConflict],
// [ErrTooLarge], a [*wire.TokenError] for a bad id, [ErrInvalidDecision]
// for an aggregate that broke the contract, [ErrOutcomeNotSendable] for an
// outcome kind (see [Repository.HandleOutcome]), or an infrastructure
// error. [IsPermanent] tells which of them a retry cannot change.
func (r *Repository) Handle(ctx context.Context, req Request) (Result, error) {
	q, err := r.newCall(req)
	if err != nil {
		return Result{}, err
	}
	return r.handle(ctx, q)
}

// resolve is where every request to an aggregate starts: its type's
// registered definition ([ErrUnknownType]) and its aggregate, validated
// here once ([wire.NewAggregateRef]: a [*wire.TokenError] for a bad id) and
// passed down as it is.
func (r *Repository) resolve(typ, id string) (*Definition, wire.AggregateRef, error) {
	def, err := r.reg.Get(typ)
	if err != nil {
		return nil, wire.AggregateRef{}, err
	}
	agg, err := wire.NewAggregateRef(typ, id)
	if err != nil {
		return nil, wire.AggregateRef{}, err
	}
	return def, agg, nil
}

// newCall validates req against the registry and gives it its decision
// id: derived from the idempotency key when there is one, else a UUIDv7.
func (r *Repository) newCall(req Request) (*call, error) {
	def, agg, err := r.resolve(req.Type, req.ID)
	if err != nil {
		return nil, err
	}
	cd, ok := def.commands[req.Kind]
	if !ok {
		return nil, fmt.Errorf("%w: %s has no command %q (it has: %v)", ErrUnknownCommand, def.typ, req.Kind, def.Commands())
	}
	if cd.outcomeOf != "" {
		return nil, fmt.Errorf("%w: %s.%s is the outcome of the %s commands %s issues; only the worker that ran one reports it. Send one of %v",
			ErrOutcomeNotSendable, def.typ, req.Kind, cd.outcomeOf, def.typ, def.Commands())
	}
	q := &call{req: req, agg: agg, def: def, key: agg.String(), decisionID: uuid.Must(uuid.NewV7()).String()}
	if req.IdempotencyKey != "" {
		q.decisionID = r.DecisionID(req.Type, req.ID, req.IdempotencyKey)
		q.digest = digest(req.Kind, req.Payload)
	}
	return q, nil
}

// handle runs a request under the aggregate's lock: load, answer a retry
// from the log, decide, append, and on a conflict reload the tail and
// decide again.
func (r *Repository) handle(ctx context.Context, q *call) (Result, error) {
	if err := r.cfg.Sites.check(q.req.Type, q.req.ID); err != nil {
		return Result{}, err
	}
	mu := r.locks.lock(q.key)
	mu.Lock()
	defer mu.Unlock()

	q.gen = r.cache.generation()
	e, loaded, err := r.get(ctx, q.def, q.agg)
	if err != nil {
		return Result{}, err
	}
	tailChecked := loaded // a cold load has just read the tail
	for attempt := 0; ; attempt++ {
		if res, ok, err := r.answered(ctx, q, e); ok || err != nil {
			return res, err
		}
		if q.outcome != nil {
			again, err := r.admit(ctx, q, e, &tailChecked)
			if err != nil {
				return Result{}, err
			}
			if again {
				continue
			}
		}
		if e.archived() && q.def.archived == ArchivedRefuse && q.outcome == nil {
			return Result{}, fmt.Errorf("%w: %s/%s was archived at seq %d; its type refuses commands to archived aggregates (archive.types.%s.on_command)",
				ErrArchived, q.req.Type, q.req.ID, e.archivedSeq, q.req.Type)
		}
		dec, err := r.decide(q, e)
		if !tailChecked && appendsNothing(dec, err) {
			// A rejection or a no-op appends nothing, so no expectation
			// would catch a stale cache (another node moved the aggregate):
			// check the tail once before answering.
			tailChecked = true
			moved, rerr := r.tailMoved(ctx, q, e)
			if rerr != nil {
				return Result{}, rerr
			}
			if moved {
				continue
			}
		}
		if err != nil {
			return Result{}, err
		}
		if len(dec.Events) == 0 && q.outcome != nil {
			// An outcome that records nothing would leave its command
			// awaited for ever, silently: it is refused, with the reason
			// (the worker records it in the command's receipt).
			return Result{}, &OutcomeRefusedError{Type: q.req.Type, ID: q.req.ID, Kind: q.req.Kind, CommandID: q.outcome.commandID,
				Reason: "Decide recorded no event for it, so the command would stay awaited; record an event for every outcome"}
		}
		if len(dec.Events) == 0 {
			return r.nothingToAppend(q, e, dec)
		}
		res, again, err := r.commit(ctx, q, e, dec, attempt)
		if again {
			continue
		}
		return res, err
	}
}

// appendsNothing is true for a decision that writes nothing: a rejection
// or a no-op.
func appendsNothing(dec Decision, err error) bool {
	return errors.Is(err, ErrRejected) || (err == nil && len(dec.Events) == 0)
}

// tailMoved folds what the log holds past e's position and says whether
// there was anything.
func (r *Repository) tailMoved(ctx context.Context, q *call, e *entry) (bool, error) {
	before := e.pos
	if err := r.refresh(ctx, q.def, q.agg, e, 0); err != nil {
		r.cache.remove(q.key)
		return false, err
	}
	return e.pos != before, nil
}

// nothingToAppend answers a decision without events: a no-op, or a broken
// contract when it issues commands anyway.
func (r *Repository) nothingToAppend(q *call, e *entry, dec Decision) (Result, error) {
	if len(dec.Commands) > 0 {
		return Result{}, fmt.Errorf("%w: %s.%s issued %d command(s) without recording an event", ErrInvalidDecision, q.req.Type, q.req.Kind, len(dec.Commands))
	}
	r.stats.commands.Add(1)
	return Result{AggregateType: q.req.Type, AggregateID: q.req.ID, Version: e.pos.Version, Seq: e.pos.Seq, Position: wire.EndOfSeq(e.pos.Seq), Events: []EventRef{}, Commands: []CommandRef{}}, nil
}

// commit appends dec at e's position and settles the result. again is true
// after a conflict that left e refreshed: decide again on the new state.
func (r *Repository) commit(ctx context.Context, q *call, e *entry, dec Decision, attempt int) (res Result, again bool, err error) {
	sd, err := toStreams(q.req, q.decisionID, q.digest, dec)
	if err == nil {
		err = q.def.stamp(&sd)
	}
	if err != nil {
		return Result{}, false, err
	}
	events, commands, err := specsOf(dec)
	if err != nil {
		return Result{}, false, err
	}
	sealed, err := r.seal(ctx, sd, events, commands)
	if err != nil {
		return Result{}, false, err
	}
	failpoint.Hit(failpoint.BeforeAppend)
	rec, err := r.append(ctx, q.agg, sealed, e.pos)
	if err != nil {
		again, err = r.appendFailed(ctx, q, e, attempt, err)
		return Result{}, again, err
	}
	rec = plain(rec, sd)
	failpoint.Hit(failpoint.AfterAppend) // crash tests: stored, not yet answered
	res, err = r.settle(ctx, q, e, rec)
	return res, false, err
}

// appendFailed translates an append error. A conflict within the retries
// refreshes e and asks to decide again; anything else is returned.
func (r *Repository) appendFailed(ctx context.Context, q *call, e *entry, attempt int, err error) (again bool, _ error) {
	req := q.req
	var conflict *streams.ConflictError
	switch {
	case errors.As(err, &conflict):
		r.stats.conflicts.Add(1)
		if attempt >= r.cfg.ConflictRetries {
			r.cache.remove(q.key)
			return false, fmt.Errorf("%w: %s/%s changed %d times while deciding %s; retry later", ErrConflict, req.Type, req.ID, attempt+1, req.Kind)
		}
		if err := sleepJitter(ctx, attempt); err != nil {
			return false, err
		}
		if err := r.refresh(ctx, q.def, q.agg, e, conflict.Actual.Seq); err != nil {
			r.cache.remove(q.key)
			return false, err
		}
		return true, nil
	case errors.Is(err, streams.ErrTooLarge):
		return false, fmt.Errorf("%w: %w", ErrTooLarge, err)
	case errors.Is(err, streams.ErrInvalidDecision), errors.Is(err, wire.ErrInvalidToken):
		return false, fmt.Errorf("%w: %s.%s: %w", ErrInvalidDecision, req.Type, req.Kind, err)
	default:
		// The outcome may be unknown: forget the cached state so the
		// next command reloads what the log really holds.
		r.cache.remove(q.key)
		return false, fmt.Errorf("handle %s/%s %s: %w", req.Type, req.ID, req.Kind, err)
	}
}

// settle turns a stored record into the result: the record may be an
// earlier copy of this decision, or another request's that won the race
// for the key; otherwise it is folded into e, snapshotted when due, and
// cached.
func (r *Repository) settle(ctx context.Context, q *call, e *entry, rec streams.Record) (Result, error) {
	req := q.req
	if same, err := r.sameDigest(ctx, rec.RequestDigest, q.digest); err != nil || !same {
		r.cache.remove(q.key)
		if err != nil {
			return Result{}, err
		}
		return Result{}, fmt.Errorf("%w: key %q was first used for another request on %s/%s", ErrKeyReused, req.IdempotencyKey, req.Type, req.ID)
	}
	if rec.FirstVersion() != e.pos.Version+1 {
		// Append returned an earlier copy of this decision.
		r.cache.remove(q.key)
		r.stats.replays.Add(1)
		res := resultOf(rec)
		res.Replayed = true
		return res, nil
	}
	if err := r.fold(q.def, e, rec); err != nil {
		r.cache.remove(q.key)
		return Result{}, err
	}
	// A forget since the state was read: it may hold the forgotten
	// subject's plaintext, which no snapshot may seal again (under a key
	// that survives) nor the cache keep.
	if r.snapshotDue(e) && r.cache.generation() == q.gen {
		r.writeSnapshot(ctx, q.def, req.Type, req.ID, e)
	}
	r.cache.put(q.key, e, q.gen)
	r.stats.commands.Add(1)
	return resultOf(rec), nil
}

func toStreams(req Request, decisionID, dig string, dec Decision) (streams.Decision, error) {
	sd := streams.Decision{
		ID: decisionID, AggregateType: req.Type, AggregateID: req.ID,
		CorrelationID: req.CorrelationID, CausationID: req.CausationID, TraceParent: req.TraceParent,
		IdempotencyKey: req.IdempotencyKey, RequestDigest: dig,
	}
	if sd.CorrelationID == "" {
		sd.CorrelationID = decisionID
	}
	for i, ne := range dec.Events {
		data, err := json.Marshal(ne.Data)
		if err != nil {
			return sd, fmt.Errorf("%w: %s.%s event %d (%s): %v", ErrInvalidDecision, req.Type, req.Kind, i, ne.Type, err)
		}
		sd.Events = append(sd.Events, streams.Event{Type: ne.Type, Schema: ne.Schema, Data: data})
	}
	for i, nc := range dec.Commands {
		payload, err := json.Marshal(nc.Payload)
		if err != nil {
			return sd, fmt.Errorf("%w: %s.%s command %d (%s): %v", ErrInvalidDecision, req.Type, req.Kind, i, nc.Kind, err)
		}
		sd.Commands = append(sd.Commands, streams.Command{Kind: nc.Kind, Payload: payload, Report: nc.Report, DeliverAfter: nc.DeliverAfter, Priority: nc.Priority, Schema: nc.Schema})
	}
	return sd, nil
}

func resultOf(rec streams.Record) Result {
	res := Result{
		AggregateType: rec.AggregateType, AggregateID: rec.AggregateID, Version: rec.LastVersion(),
		DecisionID: rec.ID, Seq: rec.Seq, Position: rec.LastPosition(), Events: make([]EventRef, 0, len(rec.Events)), Commands: make([]CommandRef, 0, len(rec.Commands)),
	}
	for i, e := range rec.Events {
		res.Events = append(res.Events, EventRef{ID: e.ID, Type: e.Type, Version: e.Version, Seq: rec.Seq, Position: rec.EventPosition(i)})
	}
	for _, c := range rec.Commands {
		ref := CommandRef{ID: c.ID, Kind: c.Kind, Report: c.Report}
		if !c.DeliverAfter.IsZero() {
			t := c.DeliverAfter
			ref.DeliverAfter = &t
		}
		res.Commands = append(res.Commands, ref)
	}
	return res
}

// sleepJitter waits before deciding again: 1ms, 2ms, 4ms… (capped at 50ms),
// each with ±50% jitter so racing writers spread out.
func sleepJitter(ctx context.Context, attempt int) error {
	base := time.Millisecond << min(attempt, 6)
	base = min(base, 50*time.Millisecond)
	d := base/2 + time.Duration(rand.Int64N(int64(base)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

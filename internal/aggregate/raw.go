package aggregate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// RawAppend is a request of the raw event-store API: services in other
// languages append their own events (and the commands they issue) to an
// aggregate at an expected version, without a Decide function in esjet.
type RawAppend struct {
	Type            string       `json:"-"`
	ID              string       `json:"-"`
	ExpectedVersion uint64       `json:"expected_version"`
	Events          []RawEvent   `json:"events"`
	Commands        []RawCommand `json:"commands,omitempty"`
	IdempotencyKey  string       `json:"idempotency_key,omitempty"`
	CorrelationID   string       `json:"correlation_id,omitempty"`
	CausationID     string       `json:"causation_id,omitempty"`
	TraceParent     string       `json:"traceparent,omitempty"`
}

// RawEvent is an event in a [RawAppend].
type RawEvent struct {
	Type   string          `json:"type"`
	Schema int             `json:"schema,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// RawCommand is a command in a [RawAppend].
type RawCommand struct {
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// Report is refused: a raw type has no Decide to hear the outcome.
	Report       bool      `json:"report,omitempty"`
	DeliverAfter time.Time `json:"deliver_after,omitzero"`
	// Priority is high, normal (or empty) or low (streams.Command.Priority).
	Priority string `json:"priority,omitempty"`
	// Schema is the payload's schema version; 0 means 1
	// (streams.Command.Schema).
	Schema int `json:"schema,omitempty"`
}

// AppendRaw appends req's events and commands as one decision, on the same
// path as commands (the expectation is always set). With an idempotency key
// a retry returns the first result, even after the aggregate moved on, for
// the idempotency horizon (a keyed append reads the aggregate's decisions of
// the horizon first: keep keys for appends that may be retried). Errors: [ErrManagedType], a
// [*VersionConflictError], [ErrKeyReused], a [*wire.TokenError],
// [streams.ErrInvalidDecision] (no events, invalid JSON, a command asking
// for report), [ErrTooLarge], a
// [*RawCommandError] for a command kind the type is not configured to issue
// ([Config].RawCommands).
func (r *Repository) AppendRaw(ctx context.Context, req RawAppend) (Result, error) {
	if _, err := r.reg.Get(req.Type); err == nil {
		return Result{}, fmt.Errorf("%w: send %s a command instead of appending raw events", ErrManagedType, req.Type)
	}
	agg, err := wire.NewAggregateRef(req.Type, req.ID)
	if err != nil {
		return Result{}, err
	}
	if err := r.cfg.Sites.check(req.Type, req.ID); err != nil {
		return Result{}, err
	}
	for _, c := range req.Commands {
		if allowed := r.cfg.RawCommands[req.Type]; !slices.Contains(allowed, c.Kind) {
			return Result{}, &RawCommandError{Type: req.Type, Kind: c.Kind, Allowed: slices.Clone(allowed)}
		}
		if c.Report {
			return Result{}, fmt.Errorf(`%w: command %s of raw type %s asks for "report", but a raw type has no Decide to hear %s or %s; drop "report" (the command's receipt, shown by esjet outbox <command id>, says how it went); nothing was written`,
				streams.ErrInvalidDecision, c.Kind, req.Type, DoneKind(c.Kind), FailedKind(c.Kind))
		}
	}
	d := streams.Decision{
		ID: uuid.Must(uuid.NewV7()).String(), AggregateType: req.Type, AggregateID: req.ID,
		CorrelationID: req.CorrelationID, CausationID: req.CausationID, TraceParent: req.TraceParent,
	}
	if req.IdempotencyKey != "" {
		// The request's content: what is appended and where. Trace and
		// correlation ids may differ between a request and its retry.
		body, _ := json.Marshal(struct {
			Expected uint64       `json:"expected_version"`
			Events   []RawEvent   `json:"events"`
			Commands []RawCommand `json:"commands,omitempty"`
		}{req.ExpectedVersion, req.Events, req.Commands})
		d.ID = r.DecisionID(req.Type, req.ID, req.IdempotencyKey)
		d.IdempotencyKey, d.RequestDigest = req.IdempotencyKey, digest("raw", body)
	}
	if d.CorrelationID == "" {
		d.CorrelationID = d.ID
	}
	for _, e := range req.Events {
		d.Events = append(d.Events, streams.Event{Type: e.Type, Schema: e.Schema, Data: e.Data})
	}
	for _, c := range req.Commands {
		d.Commands = append(d.Commands, streams.Command{Kind: c.Kind, Payload: c.Payload, Report: c.Report, DeliverAfter: c.DeliverAfter, Priority: c.Priority, Schema: c.Schema})
	}

	// A keyed append first looks for its decision within the horizon: the
	// dedup window is minutes, the idempotency promise is the horizon.
	if req.IdempotencyKey != "" {
		if res, ok, err := r.findRaw(ctx, agg, d); ok || err != nil {
			return res, err
		}
	}
	pos, err := r.log.Last(ctx, agg)
	if err != nil {
		return Result{}, err
	}
	if pos.Version != req.ExpectedVersion {
		return Result{}, &VersionConflictError{Expected: req.ExpectedVersion, Actual: pos.Version}
	}
	if err := r.readable(d); err != nil {
		return Result{}, err
	}
	events, commands := r.rawSpecs(d)
	if err := oldShapes(d, events); err != nil {
		return Result{}, err
	}
	sealed, err := r.seal(ctx, d, events, commands)
	if err != nil {
		return Result{}, err
	}
	rec, err := r.append(ctx, agg, sealed, pos)
	var conflict *streams.ConflictError
	switch {
	case errors.As(err, &conflict):
		if req.IdempotencyKey != "" {
			if res, ok, err := r.findRaw(ctx, agg, d); ok || err != nil {
				return res, err
			}
		}
		return Result{}, &VersionConflictError{Expected: req.ExpectedVersion, Actual: conflict.Actual.Version}
	case errors.Is(err, streams.ErrTooLarge):
		return Result{}, fmt.Errorf("%w: %w", ErrTooLarge, err)
	case err != nil:
		return Result{}, err
	}
	if same, err := r.sameDigest(ctx, rec.RequestDigest, d.RequestDigest); err != nil {
		return Result{}, err
	} else if !same {
		return Result{}, fmt.Errorf("%w: key %q was first used for another append on %s/%s", ErrKeyReused, req.IdempotencyKey, req.Type, req.ID)
	}
	res := resultOf(rec)
	res.Replayed = rec.FirstVersion() != req.ExpectedVersion+1
	return res, nil
}

// readable refuses a raw event that no read could decode: one whose type's
// configured steps (aggregates.raw.<type>.events) cannot bring it to the
// current shape — data that is not a JSON object. Stored, it would fail
// every read of the aggregate and stop the views and the log's readers at
// it. An event newer than the steps is the writer's to own: stored, and
// refused on read until a node that knows its version serves it.
func (r *Repository) readable(d streams.Decision) error {
	for i, e := range d.Events {
		_, err := r.log.Upcast(d.AggregateType, e)
		var tn streams.TooNew
		if err == nil || errors.As(err, &tn) && tn.TooNew() {
			continue
		}
		return fmt.Errorf("%w: event %d (%s) of %s/%s at schema %d cannot be read through the type's configured steps: %v; send its data as a JSON object; nothing was written",
			streams.ErrInvalidDecision, i, e.Type, d.AggregateType, d.AggregateID, max(e.Schema, 1), err)
	}
	return nil
}

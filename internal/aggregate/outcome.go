package aggregate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/telemetry"
	"github.com/esjet/esjet/internal/wire"
)

// Outcomes: a command an aggregate issues with Report comes back as
// <kind>_done or <kind>_failed. Clients cannot send those kinds
// ([ErrOutcomeNotSendable]); the worker reports them through
// [Repository.HandleOutcome], and the framework — not each domain — lets an
// outcome reach Decide only for a command this aggregate issued, that is
// still outstanding, under the matching kind.
//
// The outstanding commands (command id → kind) are framework state kept
// beside the domain state: in the cache and in snapshots, and rebuilt on
// replay from the log: a decision's commands with Report are added (those
// the type registers an outcome of: no other can be answered), and a
// decision written by HandleOutcome removes the command it answers. Such a
// decision is recognised by its id, derived from the command id in a UUID
// namespace of its own, which no client request can produce (a client's
// keyed decision id is derived in another namespace), and by its causation
// id, the command id.

// outcomeCall is what HandleOutcome checks before Decide.
type outcomeCall struct {
	commandID string
	of        string // the issued command kind
}

// HandleOutcome records the outcome of a command the aggregate issued with
// Report: req.Kind is <kind>_done or <kind>_failed and req.Payload an
// [Outcome] naming the command id. It is the worker's path, not reachable
// from the APIs. The decision id, idempotency key (<command id>/done or
// /failed) and causation id (the command id) are derived from the outcome,
// whatever req carries, so a repeated report of the same outcome is
// answered from the log (Replayed) and writes nothing.
//
// Errors: [ErrUnknownType], [ErrUnknownCommand] (not an outcome kind of the
// type), [ErrBadCommand] (the payload is not an Outcome with a command id),
// a [*OutcomeRefusedError] (wraps [ErrOutcomeRefused]) for an outcome of a
// command the aggregate did not issue, under another kind, already
// answered (with another result or payload), of an outcome kind the type
// does not register beside the other one, or rejected or turned into a
// no-op by Decide — logged at WARN and counted in
// [Stats].OutcomesRefused — or the errors of [Repository.Handle]. Every
// refusal is permanent ([IsPermanent]).
func (r *Repository) HandleOutcome(ctx context.Context, req Request) (Result, error) {
	q, err := r.newOutcomeCall(req)
	var refused *OutcomeRefusedError
	if err != nil {
		if errors.As(err, &refused) {
			r.refused(refused, "", req.TraceParent)
		}
		return Result{}, err
	}
	res, err := r.handle(ctx, q)
	var rej *Rejection
	switch {
	case errors.As(err, &rej):
		err = &OutcomeRefusedError{Type: req.Type, ID: req.ID, Kind: req.Kind, CommandID: q.outcome.commandID,
			Reason: "the aggregate rejected it: " + rej.Error(), cause: err}
	case errors.Is(err, ErrKeyReused):
		// The same result of the same command, with another payload: a
		// worker repeats an outcome byte for byte, so this one is not it.
		err = &OutcomeRefusedError{Type: req.Type, ID: req.ID, Kind: req.Kind, CommandID: q.outcome.commandID,
			Reason: "an outcome of this command with another payload is recorded already", cause: err}
	}
	if errors.As(err, &refused) {
		r.refused(refused, q.decisionID, req.TraceParent)
	}
	return res, err
}

// refused counts and logs a refused outcome.
func (r *Repository) refused(e *OutcomeRefusedError, decisionID, traceParent string) {
	r.stats.outcomesRefused.Add(1)
	r.logger.Warn("outcome refused", "aggregate_type", e.Type, "aggregate_id", e.ID,
		"kind", e.Kind, "command_id", e.CommandID, "decision_id", decisionID, "trace_id", telemetry.TraceIDOf(traceParent),
		"reason", e.Reason)
}

// newOutcomeCall validates an outcome and gives it its identity.
func (r *Repository) newOutcomeCall(req Request) (*call, error) {
	def, agg, err := r.resolve(req.Type, req.ID)
	if err != nil {
		return nil, err
	}
	cd, ok := def.commands[req.Kind]
	if !ok || cd.outcomeOf == "" {
		of, _, isOutcome := wire.ParseOutcomeKind(req.Kind)
		if isOutcome && def.hears(of) {
			// It hears one outcome of the kind, not this one: the command
			// stays awaited, so the refusal says so (and is recorded).
			var o Outcome
			_ = json.Unmarshal(req.Payload, &o)
			return nil, &OutcomeRefusedError{Type: req.Type, ID: req.ID, Kind: req.Kind, CommandID: o.CommandID, cause: ErrUnknownCommand,
				Reason: fmt.Sprintf("%s registers no %s (it has %v), so the command stays awaited; register both outcomes of %s with On", def.typ, req.Kind, def.Outcomes(), of)}
		}
		if isOutcome {
			return nil, fmt.Errorf("%w: %s has no outcome %q: it registers neither %s nor %s, so it cannot hear how a %s command went; issue %s with Decision.Fire (no report), or register its outcomes with On",
				ErrUnknownCommand, def.typ, req.Kind, DoneKind(of), FailedKind(of), of, of)
		}
		return nil, fmt.Errorf("%w: %s has no outcome %q (it has: %v)", ErrUnknownCommand, def.typ, req.Kind, def.Outcomes())
	}
	var o Outcome
	if err := json.Unmarshal(req.Payload, &o); err != nil {
		return nil, fmt.Errorf("%w: %s.%s: %w", ErrBadCommand, def.typ, req.Kind, err)
	}
	if o.CommandID == "" {
		return nil, fmt.Errorf("%w: %s.%s: the outcome names no command_id", ErrBadCommand, def.typ, req.Kind)
	}
	req.IdempotencyKey = o.CommandID + "/" + cd.result
	req.CausationID = o.CommandID
	return &call{
		req: req, agg: agg, def: def, key: agg.String(),
		decisionID: r.outcomeDecisionID(req.Type, req.ID, o.CommandID, cd.result),
		digest:     digest(req.Kind, req.Payload),
		outcome:    &outcomeCall{commandID: o.CommandID, of: cd.outcomeOf},
	}, nil
}

// outcomeDecisionID is the id of the decision recording the outcome
// (result "done" or "failed") of command commandID.
func (r *Repository) outcomeDecisionID(typ, id, commandID, result string) string {
	return wire.OutcomeDecisionID(r.outcomeSpace, typ, id, commandID, result)
}

// admit lets an outcome through when its command is outstanding under the
// matching kind. Otherwise it reads the tail once (another node may have
// issued the command: again asks to start over on the new state), then
// refuses. A command newer than the log seen here is not refused: that
// error is transient, the report comes back.
func (r *Repository) admit(ctx context.Context, q *call, e *entry, tailChecked *bool) (again bool, _ error) {
	o := q.outcome
	if kind, ok := e.outstanding[o.commandID]; ok && kind == o.of {
		return false, nil
	}
	if !*tailChecked {
		*tailChecked = true
		moved, err := r.tailMoved(ctx, q, e)
		if err != nil || moved {
			return moved, err
		}
	}
	refuse := func(format string, args ...any) error {
		return &OutcomeRefusedError{Type: q.req.Type, ID: q.req.ID, Kind: q.req.Kind, CommandID: o.commandID, Reason: fmt.Sprintf(format, args...)}
	}
	if kind, ok := e.outstanding[o.commandID]; ok {
		return false, refuse("command %s is a %s, not a %s", o.commandID, kind, o.of)
	}
	version, ok := issuedBy(o.commandID, q.req.Type, q.req.ID)
	switch {
	case !ok:
		return false, refuse("%s/%s issued no command %s (its command ids are %s:%s:<version>:<index>)", q.req.Type, q.req.ID, o.commandID, q.req.Type, q.req.ID)
	case version > e.pos.Version:
		return false, fmt.Errorf("outcome of %s: %s/%s is at version %d here, before the decision that issued the command; the log read is behind, report again",
			o.commandID, q.req.Type, q.req.ID, e.pos.Version)
	}
	return false, refuse("command %s is not outstanding: %s/%s did not issue it with Report, or its outcome is recorded already", o.commandID, q.req.Type, q.req.ID)
}

// issuedBy parses a command id ([wire.ParseCommandID]) and reports the
// version when the id belongs to aggregate typ/id.
func issuedBy(commandID, typ, id string) (version uint64, ok bool) {
	ref, err := wire.ParseCommandID(commandID)
	if err != nil || ref.AggregateType != typ || ref.AggregateID != id {
		return 0, false
	}
	return ref.Version, true
}

// track keeps e's outstanding commands up to date with rec: the command an
// outcome decision answers is removed, the reported commands rec issues are
// added — those def can hear an outcome of: a command whose outcomes the
// type does not register would be awaited for ever.
func (r *Repository) track(def *Definition, e *entry, rec streams.Record) {
	if e.outstanding == nil {
		e.outstanding = map[string]string{}
	}
	if c := rec.CausationID; c != "" {
		if _, ok := e.outstanding[c]; ok {
			if answered, _, ok := wire.OutcomeOf(r.outcomeSpace, rec); ok && answered == c {
				delete(e.outstanding, c)
			}
		}
	}
	for _, c := range rec.Commands {
		if c.Report && def.hears(c.Kind) {
			e.outstanding[c.ID] = c.Kind
		}
	}
}

package aggregate

import (
	"context"
	"errors"
	"fmt"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Sentinels of the package; match them with errors.Is. The HTTP status
// each maps to is the API's (internal/api), given here for orientation.
var (
	// ErrRejected is wrapped by [*Rejection]: the domain said no. Nothing
	// was written. HTTP 422.
	ErrRejected = errors.New("aggregate: command rejected")
	// ErrUnknownType: no aggregate type of that name is registered. 404.
	ErrUnknownType = errors.New("aggregate: unknown aggregate type")
	// ErrUnknownCommand: the type has no command of that kind. 400.
	ErrUnknownCommand = errors.New("aggregate: unknown command")
	// ErrBadCommand: the command's payload does not decode into the
	// command's type (malformed JSON, unknown fields, wrong types). 400.
	ErrBadCommand = errors.New("aggregate: bad command payload")
	// ErrNotFound: the aggregate has no events. 404.
	ErrNotFound = errors.New("aggregate: not found")
	// ErrConflict: the aggregate kept moving under us; the repository gave
	// up after its retries. 409.
	ErrConflict = errors.New("aggregate: too many concurrent changes")
	// ErrKeyReused: an idempotency key came back with a different request.
	// 409.
	ErrKeyReused = errors.New("aggregate: idempotency key reused with a different request")
	// ErrTooLarge: the decision is bigger than streams.max_message_size.
	// HTTP 413.
	ErrTooLarge = errors.New("aggregate: decision too large")
	// ErrInvalidDecision: Decide broke the contract (commands without an
	// event, an invalid event type…). A bug in the aggregate. 500.
	ErrInvalidDecision = errors.New("aggregate: invalid decision")
	// ErrManagedType is returned by [Repository.AppendRaw] for a type that
	// has a registered Definition: its events come from its Decide
	// functions only. 400.
	ErrManagedType = errors.New("aggregate: type is managed by its registered Decide functions")
	// ErrOutcomeNotSendable: [Repository.Handle] was asked to run an
	// outcome kind (<kind>_done, <kind>_failed). Only the worker that ran
	// the command reports its outcome, through [Repository.HandleOutcome].
	// The API answers 403 outcome_not_sendable.
	ErrOutcomeNotSendable = errors.New("aggregate: outcomes are reported by workers, not sent")
	// ErrOutcomeRefused is wrapped by [*OutcomeRefusedError]: the outcome
	// is not for a command this aggregate issued and still awaits, or the
	// domain rejected it. Nothing was written; the refusal is logged and
	// counted ([Stats].OutcomesRefused).
	ErrOutcomeRefused = errors.New("aggregate: outcome refused")
	// ErrRawCommandNotAllowed is wrapped by [*RawCommandError]: a raw
	// append issued a command kind its type is not configured to issue.
	// Nothing was written. The API answers 403 raw_command_not_allowed.
	ErrRawCommandNotAllowed = errors.New("aggregate: command kind not allowed for the raw type")
	// ErrArchived: the aggregate was archived (its decisions moved to the
	// archive behind a tombstone) and its type refuses commands to an
	// archived aggregate ([ArchivedRefuse]). Nothing was written. 409
	// archived.
	ErrArchived = errors.New("aggregate: aggregate is archived")
)

// RawCommandError says which command kind a raw append may not issue, and
// what the type may issue. It wraps [ErrRawCommandNotAllowed].
type RawCommandError struct {
	Type    string   // the raw aggregate type
	Kind    string   // the refused command kind
	Allowed []string // what the type may issue (aggregates.raw.<type>.commands)
}

func (e *RawCommandError) Error() string {
	allowed := "no command kinds"
	if len(e.Allowed) > 0 {
		allowed = fmt.Sprintf("only %v", e.Allowed)
	}
	return fmt.Sprintf("raw type %q may not issue command kind %q (it may issue %s); nothing was written. To allow it, add %q to aggregates.raw.%s.commands in the node's config",
		e.Type, e.Kind, allowed, e.Kind, e.Type)
}

func (e *RawCommandError) Unwrap() error { return ErrRawCommandNotAllowed }

// OutcomeRefusedError says which outcome [Repository.HandleOutcome]
// refused and why. It wraps [ErrOutcomeRefused] (and the domain's
// [*Rejection] when Decide said no).
type OutcomeRefusedError struct {
	Type, ID  string // the aggregate
	Kind      string // <kind>_done or <kind>_failed
	CommandID string
	Reason    string
	cause     error
}

func (e *OutcomeRefusedError) Error() string {
	return fmt.Sprintf("%s for command %q refused by %s/%s: %s", e.Kind, e.CommandID, e.Type, e.ID, e.Reason)
}

func (e *OutcomeRefusedError) Unwrap() []error {
	if e.cause != nil {
		return []error{ErrOutcomeRefused, e.cause}
	}
	return []error{ErrOutcomeRefused}
}

// Rejection is a domain "no": the command is valid but not acceptable in the
// current state ("budget exceeded"). Decide returns it through [Reject]. It
// wraps [ErrRejected].
type Rejection struct {
	Code    string // machine-readable, e.g. "budget_exceeded"
	Message string
}

func (r *Rejection) Error() string { return r.Code + ": " + r.Message }
func (r *Rejection) Unwrap() error { return ErrRejected }

// Reject returns a [*Rejection].
func Reject(code, format string, args ...any) error {
	return &Rejection{Code: code, Message: fmt.Sprintf(format, args...)}
}

// VersionConflictError reports a raw append whose expected version is not
// the aggregate's current one. It wraps [ErrConflict].
type VersionConflictError struct {
	Expected, Actual uint64
}

func (e *VersionConflictError) Error() string {
	return fmt.Sprintf("expected version %d, aggregate is at version %d; load the new events and decide again", e.Expected, e.Actual)
}

func (e *VersionConflictError) Unwrap() error { return ErrConflict }

// IsPermanent reports whether err, returned by [Repository.Handle],
// [Repository.HandleOutcome] or [Repository.AppendRaw], is an answer no
// retry of the same request will change: a rejection, a payload or token
// that does not validate, an unknown type or kind, a reused idempotency
// key, a decision too large, an outcome refused or sent by a client, a raw
// command kind not configured for its type.
// Conflicts, timeouts, an unknown outcome of an append, a full store and
// other infrastructure errors are transient, and so is
// [ErrInvalidDecision] (a bug in Decide, which a deploy fixes: a retry then
// succeeds). nil is not permanent.
//
// This is the rule a caller retrying on someone's behalf (the worker
// reporting an outcome) follows; transports map errors to their own codes.
func IsPermanent(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrInvalidDecision),
		errors.Is(err, ErrConflict), // also *VersionConflictError
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.Is(err, ErrRejected),
		errors.Is(err, ErrUnknownType),
		errors.Is(err, ErrUnknownCommand),
		errors.Is(err, ErrBadCommand),
		errors.Is(err, ErrNotFound),
		errors.Is(err, ErrKeyReused),
		errors.Is(err, ErrTooLarge), errors.Is(err, streams.ErrTooLarge),
		errors.Is(err, ErrManagedType),
		errors.Is(err, ErrOutcomeNotSendable), errors.Is(err, ErrOutcomeRefused),
		errors.Is(err, ErrRawCommandNotAllowed), errors.Is(err, ErrWrongSite),
		errors.Is(err, streams.ErrInvalidDecision),
		errors.Is(err, wire.ErrInvalidToken):
		return true
	default:
		return false
	}
}

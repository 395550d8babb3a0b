package aggregate

import (
	"context"
	"errors"
	"fmt"

	"github.com/esjet/esjet/internal/streams"
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
)

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

// IsPermanent reports whether err, returned by [Repository.Handle] or
// [Repository.AppendRaw], is an answer no retry of the same request will
// change: a rejection, a payload or token that does not validate, an unknown
// type or kind, a reused idempotency key, a decision too large. Conflicts,
// timeouts, an unknown outcome of an append, a full store and other
// infrastructure errors are transient, and so is [ErrInvalidDecision] (a
// bug in Decide, which a deploy fixes: a retry then succeeds). nil is not
// permanent.
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
		errors.Is(err, streams.ErrInvalidDecision),
		errors.Is(err, streams.ErrInvalidToken):
		return true
	default:
		return false
	}
}

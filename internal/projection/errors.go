package projection

import (
	"errors"
	"fmt"
)

// Sentinels; match them with errors.Is.
var (
	// ErrUnknown: no projection of that name is defined.
	ErrUnknown = errors.New("projection: unknown projection")
	// ErrInvalid: a definition, a key or a request is not valid.
	ErrInvalid = errors.New("projection: invalid")
	// ErrFenced: another owner has written the projection's checkpoint
	// since this one read it; this owner must stop.
	ErrFenced = errors.New("projection: fenced by a newer owner")
	// ErrParked: the projection holds a parked event of the aggregate (or,
	// single, is stopped at one): a wait for a later position cannot end.
	ErrParked = errors.New("projection: parked")
	// ErrStopped: the projection is paused or has no owner running it.
	ErrStopped = errors.New("projection: stopped")
	// ErrNotYet: the projection did not pass the position within the wait.
	ErrNotYet = errors.New("projection: not yet at the position")
	// ErrOwnStore: the view is kept in the user's own store (a [Sink]):
	// esjet holds none of its documents and cannot say what they reflect.
	ErrOwnStore = errors.New("projection: view kept in your own store")
	// ErrNotFound: the view has no document under the key.
	ErrNotFound = errors.New("projection: no such document")
	// ErrConflict: a document changed under the batch (another partition
	// wrote it); the batch is applied again on fresh documents.
	ErrConflict = errors.New("projection: document changed concurrently")
)

// HandlerError is a handler's error on one event, after its retries.
type HandlerError struct {
	Projection string
	Position   uint64
	Attempts   int
	Err        error
}

func (e *HandlerError) Error() string {
	return fmt.Sprintf("projection %s: event at position %d failed %d time(s): %v", e.Projection, e.Position, e.Attempts, e.Err)
}

func (e *HandlerError) Unwrap() error { return e.Err }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

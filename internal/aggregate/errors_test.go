package aggregate

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// TestIsPermanentSortsAnswersFromTroubles pins the rule the worker's
// feedback follows: a refusal no retry changes is permanent; a conflict, a
// timeout or an infrastructure failure is worth another try.
func TestIsPermanentSortsAnswersFromTroubles(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("handle trip/t1 book_flight_done: %w", err) }
	permanent := []error{
		Reject("budget_exceeded", "too much"),
		wrap(fmt.Errorf("%w: trip has no command %q", ErrUnknownCommand, "x")),
		wrap(fmt.Errorf("%w %q", ErrUnknownType, "nope")),
		wrap(fmt.Errorf("%w: trip.add_note: bad json", ErrBadCommand)),
		wrap(ErrKeyReused),
		wrap(fmt.Errorf("%w: %w", ErrTooLarge, streams.ErrTooLarge)),
		wire.ValidateToken("aggregate id", "a.b"),
		wrap(ErrManagedType),
		wrap(ErrNotFound),
	}
	transient := []error{
		nil,
		wrap(ErrConflict),
		&VersionConflictError{Expected: 1, Actual: 2},
		wrap(context.DeadlineExceeded),
		wrap(context.Canceled),
		wrap(fmt.Errorf("%w: trip.add_note panicked", ErrInvalidDecision)),
		wrap(errors.New("nats: no responders available for request")),
		wrap(streams.ErrUnknownOutcome),
	}
	for _, err := range permanent {
		if !IsPermanent(err) {
			t.Errorf("IsPermanent(%v) = false, want true", err)
		}
	}
	for _, err := range transient {
		if IsPermanent(err) {
			t.Errorf("IsPermanent(%v) = true, want false", err)
		}
	}
}

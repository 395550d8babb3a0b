package streams

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var (
	// ErrVersionConflict is wrapped by [*ConflictError]: the aggregate moved
	// past the expected position. Reload the tail and decide again.
	ErrVersionConflict = errors.New("streams: version conflict")

	// ErrTooLarge is wrapped by [*SizeError]: the encoded decision is bigger
	// than the configured max message size. Nothing was written.
	ErrTooLarge = errors.New("streams: decision too large")

	// ErrInvalidDecision reports a decision that cannot be appended as given
	// (no events, missing id, invalid JSON data…). Nothing was written.
	ErrInvalidDecision = errors.New("streams: invalid decision")

	// ErrUnknownOutcome reports an append whose outcome could not be learned
	// (every attempt timed out and the tail does not show it yet). Retrying
	// with the same decision id is safe and resolves it.
	ErrUnknownOutcome = errors.New("streams: append outcome unknown")

	// ErrDuplicateDecisionID reports a decision id already stored for a
	// different aggregate or decision inside the dedup window.
	ErrDuplicateDecisionID = errors.New("streams: decision id already used")

	// ErrStorageFull reports an append JetStream refused for lack of
	// storage (account or server limits, a full disk). Nothing was written;
	// retry once space is freed or the limits are raised.
	ErrStorageFull = errors.New("streams: storage full")

	// ErrCorrupt is wrapped by [*DecodeError] and by integrity failures found
	// while loading (a gap in an aggregate's versions).
	ErrCorrupt = errors.New("streams: corrupt log entry")
)

// ConflictError is returned by [Log.Append] when the aggregate's last stored
// position is not the expected one. Actual is where the aggregate really is.
type ConflictError struct {
	Subject  string
	Expected Position
	Actual   Position
	Err      error // the JetStream error, if any
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("append to %s: expected position seq %d (version %d), aggregate is at seq %d (version %d): %v",
		e.Subject, e.Expected.Seq, e.Expected.Version, e.Actual.Seq, e.Actual.Version, ErrVersionConflict)
}

func (e *ConflictError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrVersionConflict}
	}
	return []error{ErrVersionConflict, e.Err}
}

// SizeError reports an encoded decision bigger than the limit.
type SizeError struct {
	Size, Limit int
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("decision is %d bytes encoded, over the %d-byte limit (streams.max_message_size); split the work into smaller decisions or store large payloads elsewhere and reference them", e.Size, e.Limit)
}

func (e *SizeError) Unwrap() error { return ErrTooLarge }

// DecodeError reports a stored message that is not a valid esjet envelope.
type DecodeError struct {
	Seq     uint64
	Subject string
	Err     error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("decode message seq %d on %s: %v", e.Seq, e.Subject, e.Err)
}

func (e *DecodeError) Unwrap() []error { return []error{ErrCorrupt, e.Err} }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidDecision, fmt.Sprintf(format, args...))
}

// isConflict reports whether err is JetStream's wrong-last-sequence error:
// 10071 (single server, carries the actual sequence) or 10164 (clustered and
// batch paths, without it).
func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
	}
	return false
}

// isStorageFull reports JetStream's out-of-storage errors: 10047
// (insufficient storage resources), 10023 (insufficient resources), 10077
// (the store failed to write).
func isStorageFull(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case 10047, 10023, 10077:
			return true
		}
	}
	return false
}

func isTooLarge(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum
	}
	return errors.Is(err, nats.ErrMaxPayload)
}

// ErrImmutable is wrapped by [*ImmutableError].
var ErrImmutable = errors.New("streams: existing stream cannot be changed to match config")

// ImmutableError names the settings of an existing stream that JetStream does
// not allow to change in place.
type ImmutableError struct {
	Stream string
	Fields []string // "field: current → wanted"
}

func (e *ImmutableError) Error() string {
	return fmt.Sprintf("stream %s exists with settings JetStream cannot change in place (%s); "+
		"keep the old values in the config, or migrate the data to a new namespace", e.Stream, strings.Join(e.Fields, "; "))
}

func (e *ImmutableError) Unwrap() error { return ErrImmutable }

// ErrUnsafeStream is wrapped by [*StreamConfigError]: an existing stream
// differs from the configuration in a way a node does not run with.
var ErrUnsafeStream = errors.New("streams: existing stream would lose history or lacks what the node needs")

// StreamConfigError names the settings of an existing stream that would lose
// or hide history ([DiffLossy]) or that the node needs and may not apply
// ([DiffNeeded]): a node creates what is missing but never updates what
// exists, so it refuses to start until an admin applies the configuration.
type StreamConfigError struct {
	Stream string
	Diffs  []Diff
}

func (e *StreamConfigError) Error() string {
	parts := make([]string, len(e.Diffs))
	immutable := false
	for i, d := range e.Diffs {
		parts[i] = d.explain()
		immutable = immutable || d.Immutable
	}
	fix := "run `esjet provision` with this configuration as an admin user (or set the stream by hand), then start the node"
	if immutable {
		fix = "JetStream cannot change some of these in place: move the data to a new stream (or keep the old values in the config); run `esjet provision` as an admin user for the rest"
	}
	return fmt.Sprintf("stream %s exists with settings the node does not run with: %s; the node never changes an existing stream: %s",
		e.Stream, strings.Join(parts, "; "), fix)
}

func (e *StreamConfigError) Unwrap() error { return ErrUnsafeStream }

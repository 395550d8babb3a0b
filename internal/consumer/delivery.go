package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/internal/wire"
	"github.com/esjet/esjet/receiver"
)

// Delivery is one attempt at one command.
type Delivery struct {
	CommandID string
	Kind      string
	Payload   json.RawMessage
	Attempt   int // 1 on the first delivery
	// Fence is the delivery's fencing token: the worker consumer's delivery
	// sequence (plus, for a command re-driven from the DLQ, the fence it
	// died with, so it rises across the priority bands' consumers), which
	// rises with every delivery of the command (after a lost lease, a nak,
	// a crash, a DLQ re-drive). Pass it to the receiver
	// (targets get it as the Esjet-Fence header): one that remembers the
	// highest fence per idempotency key and refuses a lower one
	// (receiver.DoFenced) never applies a stale worker's call.
	Fence            uint64
	AggregateType    string
	AggregateID      string
	AggregateVersion uint64 // the version of the decision that issued the command
	DecisionID       string
	CorrelationID    string
	TraceParent      string
	Report           bool
	// Priority is the command's band: high, low or empty (normal).
	Priority string
	// Schema is the version of Payload's shape (1 when the command does
	// not say): never newer than the worker's KindConfig.Schema.
	Schema int
	// Deferred is how many deliveries of the command workers that did not
	// understand its schema left alone (not counted in Attempt).
	Deferred int
	// HandedBack is how many deliveries of the command stopping workers
	// gave back without running it (not counted in Attempt either).
	HandedBack int
	// Header is the OUTBOX message's header, for anything else.
	Header nats.Header
}

// IdempotencyKey is what receivers dedupe on: the command id.
func (d Delivery) IdempotencyKey() string { return d.CommandID }

// deliveryFrom decodes an OUTBOX message into attempt number attempt,
// delivered with its band consumer's delivery sequence seq: its fencing
// token is seq plus the message's fence base (wire.HeaderFenceBase, set by
// a re-drive). The error wraps wire.ErrNotACommand; the Delivery holds what
// could be read.
func deliveryFrom(m *nats.Msg, attempt int, seq uint64) (Delivery, error) {
	c, err := wire.DecodeCommand(m)
	return Delivery{
		CommandID: c.ID, Kind: c.Kind, Payload: c.Payload, Attempt: attempt, Fence: c.FenceBase + seq, Priority: c.Priority, Schema: c.Schema,
		AggregateType: c.AggregateType, AggregateID: c.AggregateID, AggregateVersion: c.Version,
		DecisionID: c.DecisionID, CorrelationID: c.CorrelationID, TraceParent: c.TraceParent,
		Report: c.Report, Header: m.Header,
	}, err
}

// command is the wire form of d, for the request headers of a target.
func (d Delivery) command() wire.OutboxCommand {
	return wire.OutboxCommand{ID: d.CommandID, Kind: d.Kind, AggregateType: d.AggregateType, AggregateID: d.AggregateID,
		Version: d.AggregateVersion, DecisionID: d.DecisionID, CorrelationID: d.CorrelationID, TraceParent: d.TraceParent,
		Report: d.Report, Schema: d.Schema}
}

// Handler carries out one command. It returns the result (JSON, may be nil)
// or an error: a [*RetryableError] (see [Retry]), a [*TerminalError] (see
// [Terminal]), a [*FencedError] (see [Fenced]; receiver.ErrStale counts as
// one) or an [*UnavailableError] (see [Unavailable]); any other error
// counts as retryable. It must honour ctx.
type Handler interface {
	Handle(ctx context.Context, d Delivery) (json.RawMessage, error)
}

// HandlerFunc adapts a function to [Handler].
type HandlerFunc func(ctx context.Context, d Delivery) (json.RawMessage, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, d Delivery) (json.RawMessage, error) {
	return f(ctx, d)
}

// RetryableError asks for another attempt, after After if it is set.
type RetryableError struct {
	Err   error
	After time.Duration
}

func (e *RetryableError) Error() string { return e.Err.Error() }
func (e *RetryableError) Unwrap() error { return e.Err }

// TerminalError says no attempt will ever succeed: dead-letter it now.
type TerminalError struct{ Err error }

func (e *TerminalError) Error() string { return e.Err.Error() }
func (e *TerminalError) Unwrap() error { return e.Err }

// FencedError says the receiver refused the attempt because it has seen a
// newer one of the same command (a higher fence): this worker lost its
// lease. The worker neither retries nor acks; the newer delivery finishes.
type FencedError struct{ Err error }

func (e *FencedError) Error() string { return e.Err.Error() }
func (e *FencedError) Unwrap() error { return e.Err }

// UnavailableError says nobody is there to take the command (a NATS
// request with no responders, an HTTP connection refused): the target is
// down or restarting. The worker keeps the command and calls again with
// backoff, for up to the kind's timeout or AckWait, whichever is shorter,
// before it counts the attempt.
type UnavailableError struct{ Err error }

func (e *UnavailableError) Error() string { return e.Err.Error() }
func (e *UnavailableError) Unwrap() error { return e.Err }

// Retry marks err retryable, optionally after a delay (0: the backoff).
func Retry(err error, after time.Duration) error { return &RetryableError{Err: err, After: after} }

// Terminal marks err terminal.
func Terminal(err error) error { return &TerminalError{Err: err} }

// Fenced marks err as a receiver's refusal of a stale attempt (a newer
// fence was seen). Not to be confused with aggregate.StaleError, an
// append whose expected version is behind.
func Fenced(err error) error { return &FencedError{Err: err} }

// Unavailable marks err as "the target is not there".
func Unavailable(err error) error { return &UnavailableError{Err: err} }

// verdict is what a handler error asks the worker to do.
type verdict int

const (
	retryable   verdict = iota // nak with backoff (or the handler's delay)
	terminal                   // dead-letter now
	stale                      // a newer attempt exists: leave the command alone
	unavailable                // call again within the attempt, then count it
)

// classify reads a handler error: what to do, and the delay the handler
// asked for, if any.
func classify(err error) (verdict, time.Duration) {
	var (
		te *TerminalError
		se *FencedError
		ue *UnavailableError
		re *RetryableError
	)
	switch {
	case errors.As(err, &se), errors.Is(err, receiver.ErrStale):
		return stale, 0
	case errors.As(err, &te):
		return terminal, 0
	case errors.As(err, &ue):
		return unavailable, 0
	case errors.As(err, &re):
		return retryable, re.After
	}
	return retryable, 0
}

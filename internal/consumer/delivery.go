package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/internal/wire"
)

// Delivery is one attempt at one command.
type Delivery struct {
	CommandID        string
	Kind             string
	Payload          json.RawMessage
	Attempt          int // 1 on the first delivery
	AggregateType    string
	AggregateID      string
	AggregateVersion uint64 // the version of the decision that issued the command
	DecisionID       string
	CorrelationID    string
	TraceParent      string
	Report           bool
	// Header is the OUTBOX message's header, for anything else.
	Header nats.Header
}

// IdempotencyKey is what receivers dedupe on: the command id.
func (d Delivery) IdempotencyKey() string { return d.CommandID }

// deliveryFrom decodes an OUTBOX message into attempt number attempt. The
// error wraps wire.ErrNotACommand; the Delivery holds what could be read.
func deliveryFrom(m *nats.Msg, attempt int) (Delivery, error) {
	c, err := wire.DecodeCommand(m)
	return Delivery{
		CommandID: c.ID, Kind: c.Kind, Payload: c.Payload, Attempt: attempt,
		AggregateType: c.AggregateType, AggregateID: c.AggregateID, AggregateVersion: c.Version,
		DecisionID: c.DecisionID, CorrelationID: c.CorrelationID, TraceParent: c.TraceParent,
		Report: c.Report, Header: m.Header,
	}, err
}

// command is the wire form of d, for the request headers of a target.
func (d Delivery) command() wire.Command {
	return wire.Command{ID: d.CommandID, Kind: d.Kind, AggregateType: d.AggregateType, AggregateID: d.AggregateID,
		Version: d.AggregateVersion, DecisionID: d.DecisionID, CorrelationID: d.CorrelationID, TraceParent: d.TraceParent,
		Report: d.Report}
}

// Handler carries out one command. It returns the result (JSON, may be nil)
// or an error: a [*RetryableError] (see [Retry]) or a [*TerminalError] (see
// [Terminal]); any other error counts as retryable. It must honour ctx.
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

// Retry marks err retryable, optionally after a delay (0: the backoff).
func Retry(err error, after time.Duration) error { return &RetryableError{Err: err, After: after} }

// Terminal marks err terminal.
func Terminal(err error) error { return &TerminalError{Err: err} }

// classify splits a handler error into terminal or retryable (with an
// optional requested delay).
func classify(err error) (terminal bool, after time.Duration) {
	var te *TerminalError
	if errors.As(err, &te) {
		return true, 0
	}
	var re *RetryableError
	if errors.As(err, &re) {
		return false, re.After
	}
	return false, 0
}

package services

import (
	"encoding/json"
	"time"

	"github.com/esjet/esjet/internal/wire"
)

// Request headers esjet's NATS target sends (package wire names them:
// wire.RequestHeader builds them).
const (
	HeaderIdempotencyKey   = wire.HeaderIdempotencyKey // the command id: the receiver's key
	HeaderCommandID        = wire.HeaderCommandID
	HeaderCommandKind      = wire.HeaderCommandKind
	HeaderAttempt          = wire.HeaderAttempt // 1, 2, …
	HeaderFence            = wire.HeaderFence   // rises with every delivery: see receiver.DoFenced
	HeaderAggregateType    = wire.HeaderAggregateType
	HeaderAggregateID      = wire.HeaderAggregateID
	HeaderAggregateVersion = wire.HeaderVersion
)

// Reply is a reply body: {"result": …} on success, {"error": …,
// "retryable": …, "retry_after_ms": …} on failure.
type Reply struct {
	Result       json.RawMessage `json:"result,omitempty"`
	Error        string          `json:"error,omitempty"`
	Retryable    bool            `json:"retryable,omitempty"`
	Stale        bool            `json:"stale,omitempty"`
	RetryAfterMS int64           `json:"retry_after_ms,omitempty"`
}

// success and failure write the reply shapes package wire owns.
func success(result json.RawMessage) []byte { return wire.SuccessReply(result) }

func failure(f *Failure) []byte {
	return wire.FailureReply(f.Message, f.Retryable, f.Stale, f.RetryAfter)
}

// Failure is an effect's refusal, as the reply reports it.
type Failure struct {
	Message    string
	Retryable  bool
	Stale      bool          // a newer attempt was seen: the caller must not retry this one
	RetryAfter time.Duration // zero: the caller's own backoff
}

func (f *Failure) Error() string { return f.Message }

func terminal(msg string) *Failure { return &Failure{Message: msg} }

package wire

import (
	"encoding/json"
	"time"
)

// TargetReply is a target's answer to a command request (a NATS reply or
// an HTTP response body), as a worker reads it: {"result": …} (null for no
// result) on success; {"error": …, "retryable": bool} on failure, with
// "retry_after_ms" to ask for a delay, or "stale": true from a receiver
// that saw a newer attempt ([HeaderFence]). A reply with neither "result"
// nor "error" is not an answer (Result nil and Error "").
type TargetReply struct {
	Result       json.RawMessage `json:"result"` // nil: no "result" key; null is a result
	Error        string          `json:"error"`
	Retryable    bool            `json:"retryable"`
	Stale        bool            `json:"stale"`
	RetryAfterMs int64           `json:"retry_after_ms"`
}

// The shapes a target writes: a success always has "result" (null for
// none), a failure always says whether it is retryable.
type (
	successReply struct {
		Result json.RawMessage `json:"result"`
	}
	failureReply struct {
		Error        string `json:"error"`
		Retryable    bool   `json:"retryable"`
		Stale        bool   `json:"stale,omitempty"`
		RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
	}
)

// SuccessReply is the reply body of a target that carried the command out
// with result (nil: none, written as null). result must be valid JSON.
func SuccessReply(result json.RawMessage) []byte {
	if result == nil {
		result = json.RawMessage("null")
	}
	data, _ := json.Marshal(successReply{Result: result})
	return data
}

// FailureReply is the reply body of a target that refused the command:
// retryable or not, stale (a newer attempt was seen), and the delay it asks
// for before the next attempt (zero: the worker's own backoff).
func FailureReply(msg string, retryable, stale bool, retryAfter time.Duration) []byte {
	data, _ := json.Marshal(failureReply{Error: msg, Retryable: retryable, Stale: stale, RetryAfterMS: retryAfter.Milliseconds()})
	return data
}

package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Error is an API error as both surfaces report it.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Version is the aggregate's actual version on a version conflict.
	Version *uint64 `json:"version,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// MaxKeyLen caps an idempotency key.
const MaxKeyLen = 256

func checkKey(key string) error {
	if n := utf8.RuneCountInString(key); n > MaxKeyLen {
		return &Error{Status: 400, Code: "invalid_idempotency_key", Message: fmt.Sprintf("Idempotency-Key is %d characters, longer than %d", n, MaxKeyLen)}
	}
	return nil
}

// tooLarge reports a body over the limit; n < 0 when its length is unknown
// (a chunked HTTP body).
func tooLarge(n, max int) error {
	msg := fmt.Sprintf("request body is %d bytes, over the %d-byte limit (streams.max_message_size)", n, max)
	if n < 0 {
		msg = fmt.Sprintf("request body is over the %d-byte limit (streams.max_message_size)", max)
	}
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: msg}
}

// Status is the status an operation's error is answered with (200 for nil).
func Status(err error) int {
	if err == nil {
		return 200
	}
	return toError(err).Status
}

// toError maps any error from the operations to an [*Error] whose message
// a user can read: no Go package prefixes, no Go type names.
func toError(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	e := classify(err)
	e.Message = userMessage(e.Message)
	return e
}

// classify picks the status and code of an operation's error.
func classify(err error) *Error {
	var rej *aggregate.Rejection
	var vc *aggregate.VersionConflictError
	var te *wire.TokenError
	switch {
	case errors.Is(err, aggregate.ErrInvalidDecision):
		// The aggregate broke the contract: a bug on the server side, even
		// when the cause underneath is a token or JSON error.
		return &Error{Status: 500, Code: "internal", Message: err.Error()}
	case errors.As(err, &rej) && rej.Code == CodeNotFound:
		// The domain's word for "this command needs an aggregate that does
		// not exist": the same 404 as reading an aggregate with no events.
		return &Error{Status: 404, Code: rej.Code, Message: rej.Message}
	case errors.As(err, &rej):
		return &Error{Status: 422, Code: rej.Code, Message: rej.Message}
	case errors.As(err, &vc):
		v := vc.Actual
		return &Error{Status: 409, Code: "version_conflict", Message: err.Error(), Version: &v}
	case errors.As(err, &te):
		return &Error{Status: 400, Code: "invalid_token", Message: err.Error()}
	case errors.Is(err, aggregate.ErrUnknownType):
		return &Error{Status: 404, Code: "unknown_type", Message: err.Error()}
	case errors.Is(err, aggregate.ErrNotFound):
		// The code already says "not found": the message says what was not.
		return &Error{Status: 404, Code: CodeNotFound, Message: strings.TrimPrefix(err.Error(), aggregate.ErrNotFound.Error()+": ")}
	case errors.Is(err, aggregate.ErrRawCommandNotAllowed):
		return &Error{Status: http.StatusForbidden, Code: "raw_command_not_allowed", Message: err.Error()}
	case errors.Is(err, aggregate.ErrWrongSite):
		return &Error{Status: http.StatusConflict, Code: "wrong_site", Message: err.Error()}
	case errors.Is(err, aggregate.ErrOutcomeNotSendable):
		return &Error{Status: http.StatusForbidden, Code: "outcome_not_sendable", Message: err.Error()}
	case errors.Is(err, aggregate.ErrUnknownCommand):
		return &Error{Status: 400, Code: "unknown_command", Message: err.Error()}
	case errors.Is(err, aggregate.ErrBadCommand):
		return &Error{Status: 400, Code: "bad_payload", Message: payloadMessage(err)}
	case errors.Is(err, aggregate.ErrManagedType):
		return &Error{Status: 400, Code: "managed_type", Message: err.Error()}
	case errors.Is(err, streams.ErrInvalidDecision):
		return &Error{Status: 400, Code: "invalid_events", Message: err.Error()}
	case errors.Is(err, aggregate.ErrKeyReused):
		return &Error{Status: 409, Code: "idempotency_key_reused", Message: err.Error()}
	case errors.Is(err, aggregate.ErrConflict):
		return &Error{Status: 409, Code: "conflict", Message: err.Error()}
	case errors.Is(err, aggregate.ErrTooLarge), errors.Is(err, streams.ErrTooLarge):
		return &Error{Status: 413, Code: "too_large", Message: err.Error()}
	case errors.Is(err, streams.ErrStorageFull):
		return &Error{Status: http.StatusInsufficientStorage, Code: "storage_full", Message: err.Error() +
			" — nothing was written; free space or raise the JetStream storage limits (nats.embedded.max_store), then retry"}
	case errors.Is(err, streams.ErrUnknownOutcome):
		return &Error{Status: 503, Code: "outcome_unknown", Message: err.Error() +
			" — the command may have been recorded: retry with the same Idempotency-Key, or read the aggregate's events before sending it again without one"}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: 503, Code: "unavailable", Message: err.Error() +
			" — the node did not finish in time; retry with the same Idempotency-Key (without one, read the aggregate's events first)"}
	default:
		return &Error{Status: 500, Code: "internal", Message: err.Error()}
	}
}

// CodeNotFound is the error code of a missing aggregate. A domain rejection
// with this code (aggregate.Reject("not_found", …)) is answered 404, not 422.
const CodeNotFound = "not_found"

// goPrefix matches a Go package's error prefix at the start of a message or
// of one of its ": "-separated layers ("aggregate: ", "json: ").
var goPrefix = regexp.MustCompile(`(^|: )(aggregate|streams|outbox|consumer|wire|ops|api|node|broker|config|json|yaml|strconv|nats|jetstream|micro): `)

// UserMessage removes Go package prefixes ("aggregate: ", "nats: ") from an
// error message, for the CLI's own errors.
func UserMessage(msg string) string { return userMessage(msg) }

// userMessage removes Go package prefixes from an error message.
func userMessage(msg string) string {
	for {
		m := goPrefix.ReplaceAllString(msg, "$1")
		if m == msg {
			return m
		}
		msg = m
	}
}

// payloadMessage says what is wrong with a command payload in JSON terms,
// not Go's ("field \"budget\" must be a number, got a string").
func payloadMessage(err error) string {
	msg := err.Error()
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		field := ute.Field
		if field == "" {
			field = "(the payload)"
		}
		detail := fmt.Sprintf("field %q must be %s, got %s", field, jsonKind(ute.Type.Kind().String()), article(ute.Value))
		if i := strings.Index(msg, ute.Error()); i >= 0 {
			return msg[:i] + detail
		}
		return msg + ": " + detail
	}
	// Wrapped as text (%v) the type error is only a message: reword it.
	// "json: unknown field \"x\"" reads well once the prefix is gone.
	return goTypeError.ReplaceAllStringFunc(msg, func(m string) string {
		p := goTypeError.FindStringSubmatch(m)
		want := typeKind(p[3])
		if p[2] == "" {
			return fmt.Sprintf("the payload must be %s, got %s", want, article(p[1]))
		}
		field := p[2]
		if i := strings.Index(field, "."); i >= 0 {
			field = field[i+1:] // drop the Go struct's name
		}
		return fmt.Sprintf("field %q must be %s, got %s", field, want, article(p[1]))
	})
}

// goTypeError is encoding/json's UnmarshalTypeError text.
var goTypeError = regexp.MustCompile(`cannot unmarshal (\w+(?: [^ ]+)?) into Go (?:struct field ([\w.]+)|value) of type (\S+)`)

// jsonKind names a Go kind as the JSON value it decodes from.
func jsonKind(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"), strings.HasPrefix(kind, "float"):
		return "a number"
	case kind == "string":
		return "a string"
	case kind == "bool":
		return "true or false"
	case kind == "slice", kind == "array":
		return "an array"
	case kind == "map", kind == "struct":
		return "an object"
	default:
		return "a " + kind
	}
}

// typeKind names a Go type (as encoding/json prints it) as a JSON value.
func typeKind(t string) string {
	t = strings.TrimLeft(t, "*")
	switch {
	case strings.HasPrefix(t, "[]"), strings.HasPrefix(t, "["):
		return "an array"
	case strings.HasPrefix(t, "map["), strings.Contains(t, "."), strings.HasPrefix(t, "struct"):
		return "an object"
	default:
		return jsonKind(t)
	}
}

func article(v string) string {
	switch v {
	case "array", "object":
		return "an " + v
	case "number", "string", "bool":
		return "a " + v
	default:
		return v // "number -1" and the like
	}
}

// bodyMessage says what is wrong with a request body in JSON terms: where
// it stops being JSON, or which field has the wrong kind of value.
func bodyMessage(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("not valid JSON at byte %d (%s)", se.Offset, se.Error())
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "not valid JSON: it ends early"
	}
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) && strings.HasPrefix(ute.Type.Kind().String(), "uint") && strings.HasPrefix(ute.Value, "number") {
		return fmt.Sprintf("field %q must be a whole number, 0 or more, got %s", ute.Field, strings.TrimPrefix(ute.Value, "number "))
	}
	return userMessage(payloadMessage(err))
}

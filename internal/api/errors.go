package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"
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

func checkKey(key string) error { return checkKeyAs(key, HeaderIdempotencyKey) }

// checkKeyAs is [checkKey] naming the key as the caller did (a body's
// "idempotency_key", "commands[2].idempotency_key").
func checkKeyAs(key, name string) error {
	if n := utf8.RuneCountInString(key); n > MaxKeyLen {
		return &Error{Status: 400, Code: CodeInvalidIdempotencyKey, Message: fmt.Sprintf("%s is %d characters, longer than %d", name, n, MaxKeyLen)}
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
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge, Message: msg}
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
func toError(err error) *Error { return ErrorOf(err) }

// goPrefix matches a Go package's error prefix at the start of a message or
// of one of its ": "-separated layers ("aggregate: ", "json: ").
var goPrefix = regexp.MustCompile(`(^|: )(aggregate|streams|outbox|consumer|wire|ops|api|node|broker|config|projection|console|json|yaml|strconv|nats|jetstream|micro): `)

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

// jsonWords is err's message with the encoding/json error it wraps, if
// any, said in JSON terms, not Go's ("field \"budget\" must be a number,
// got a string"), in place among the layers that say which request it was.
// Every error the one table maps is worded so.
func jsonWords(err error) string {
	msg := err.Error()
	if j := jsonCause(err); j != nil {
		if i := strings.LastIndex(msg, j.Error()); i >= 0 {
			return msg[:i] + jsonProblem(j, nil) + msg[i+len(j.Error()):]
		}
		return msg + ": " + jsonProblem(j, nil)
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

// jsonCause is the encoding/json error under err, if any.
func jsonCause(err error) error {
	var se *json.SyntaxError
	var ute *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return se
	case errors.As(err, &ute):
		return ute
	case errors.Is(err, io.ErrUnexpectedEOF):
		return io.ErrUnexpectedEOF
	}
	return nil
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
	case "bool":
		return "true or false"
	case "number", "string":
		return "a " + v
	default:
		return v // "number -1" and the like
	}
}

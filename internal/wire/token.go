package wire

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// MaxTokenLen is the longest aggregate type, aggregate id, command kind or
// event type accepted. Subjects stay short and readable; ids longer than this
// are almost always a bug (a JSON blob, a path) rather than an identity.
const MaxTokenLen = 128

// ErrInvalidToken is wrapped by every [*TokenError].
var ErrInvalidToken = errors.New("wire: invalid token")

// TokenError reports a value that cannot be used as one subject token.
// Nothing is written when it is returned.
type TokenError struct {
	Field  string // "aggregate type", "aggregate id", "command kind", "event type"
	Value  string
	Reason string
}

func (e *TokenError) Error() string {
	v := e.Value
	if r := []rune(v); len(r) > 40 {
		v = string(r[:40]) + "…"
	}
	return fmt.Sprintf("invalid %s %q: %s (use 1-%d characters from A-Z a-z 0-9 _ -)", e.Field, v, e.Reason, MaxTokenLen)
}

func (e *TokenError) Unwrap() error { return ErrInvalidToken }

// ValidateToken checks that value is 1..MaxTokenLen characters from
// [A-Za-z0-9_-]. JetStream would store '*' and '>' literally, split on '.',
// and time out on an empty token, so each of those is refused here, before a
// subject is built. field names the value in the error.
func ValidateToken(field, value string) error {
	if value == "" {
		return &TokenError{Field: field, Value: value, Reason: "empty"}
	}
	// Lengths and positions are in characters (runes), as a user counts them.
	if n := utf8.RuneCountInString(value); n > MaxTokenLen {
		return &TokenError{Field: field, Value: value, Reason: fmt.Sprintf("%d characters, longer than %d", n, MaxTokenLen)}
	}
	pos := 0
	for _, c := range value {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return &TokenError{Field: field, Value: value, Reason: fmt.Sprintf("character %q at %d is not allowed", c, pos)}
		}
		pos++
	}
	return nil
}

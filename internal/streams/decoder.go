package streams

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unsafe"
)

// A hand-written decoder for the envelope: a load of 1,000 decisions spent
// most of its time in encoding/json's reflection. The parser is strict about
// the structure it walks (objects, arrays, strings, numbers, literals) and
// checks every value it does not parse itself (raw data, unknown keys) with
// json.Valid, so it refuses what json.Unmarshal refuses without scanning
// the whole document twice. Like encoding/json it matches keys exactly or else
// case-insensitively, skips unknown keys, leaves a field at its zero value
// for null (but a raw value keeps "null"), and keeps raw JSON (event data, command payloads) as written.
// FuzzDecoderMatchesEncodingJSON compares it with encoding/json.

type envDecoder struct {
	b []byte
	i int
}

var errSyntax = errors.New("invalid JSON")

func (d *envDecoder) fail(what string) error {
	return fmt.Errorf("envelope: %w at offset %d: %s", errSyntax, d.i, what)
}

func (d *envDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *envDecoder) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *envDecoder) consume(c byte) bool {
	if d.peek() == c {
		d.i++
		return true
	}
	return false
}

// null consumes a JSON null if one is next.
func (d *envDecoder) null() bool {
	d.ws()
	if len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// object calls field for each key of an object (or nothing for null).
func (d *envDecoder) object(field func(key string) error) error {
	if d.null() {
		return nil
	}
	if !d.consume('{') {
		return d.fail("expected an object")
	}
	if d.consume('}') {
		return nil
	}
	for {
		key, err := d.key()
		if err != nil {
			return err
		}
		if !d.consume(':') {
			return d.fail("expected ':'")
		}
		if err := field(key); err != nil {
			return err
		}
		if d.consume(',') {
			continue
		}
		if d.consume('}') {
			return nil
		}
		return d.fail("expected ',' or '}'")
	}
}

// array calls elem for each element of an array (or nothing for null).
func (d *envDecoder) array(elem func() error) (isNull bool, err error) {
	if d.null() {
		return true, nil
	}
	if !d.consume('[') {
		return false, d.fail("expected an array")
	}
	if d.consume(']') {
		return false, nil
	}
	for {
		if err := elem(); err != nil {
			return false, err
		}
		if d.consume(',') {
			continue
		}
		if d.consume(']') {
			return false, nil
		}
		return false, d.fail("expected ',' or ']'")
	}
}

// str reads a JSON string. Plain ASCII without escapes is taken as is;
// anything else goes through encoding/json for identical results.
func (d *envDecoder) str() (string, error) {
	if d.peek() != '"' {
		return "", d.fail("expected a string")
	}
	start := d.i
	d.i++
	plain := true
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			if plain {
				return string(d.b[start+1 : d.i-1]), nil
			}
			var s string
			if err := json.Unmarshal(d.b[start:d.i], &s); err != nil {
				return "", d.fail("bad string")
			}
			return s, nil
		case c == '\\':
			plain = false
			d.i += 2
		case c < 0x20:
			return "", d.fail("control character in string")
		case c >= 0x80:
			plain = false
			d.i++
		default:
			d.i++
		}
	}
	return "", d.fail("unterminated string")
}

// key reads an object's key as str does; a plain one is a view of the
// input, not a copy (the callers only compare it with the keys they know).
func (d *envDecoder) key() (string, error) {
	if d.peek() != '"' {
		return "", d.fail("expected a string")
	}
	start := d.i + 1
	for j := start; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			d.i = j + 1
			return unsafe.String(unsafe.SliceData(d.b[start:]), j-start), nil
		case c == '\\' || c < 0x20 || c >= 0x80:
			return d.str()
		}
	}
	return d.str() // unterminated: str says so
}

// skipStr passes over a string as str does, failing where str fails,
// without copying it: a plain one (ASCII, no escapes: most strings inside
// event data a reader skips) in place, any other through str.
func (d *envDecoder) skipStr() error {
	for j := d.i + 1; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			d.i = j + 1
			return nil
		case c == '\\' || c < 0x20 || c >= 0x80:
			_, err := d.str()
			return err
		}
	}
	_, err := d.str() // unterminated: str says so
	return err
}

// strOrNull reads a string; null leaves it "".
func (d *envDecoder) strOrNull() (string, error) {
	if d.null() {
		return "", nil
	}
	return d.str()
}

// skip passes over one JSON value and returns its bytes.
func (d *envDecoder) skip() ([]byte, error) {
	d.ws()
	start := d.i
	depth := 0
	for d.i < len(d.b) {
		switch c := d.b[d.i]; c {
		case '"':
			if err := d.skipStr(); err != nil {
				return nil, err
			}
		case '{', '[':
			depth++
			d.i++
		case '}', ']':
			depth--
			d.i++
		case ',', ':':
			if depth == 0 {
				return d.b[start:d.i], nil
			}
			d.i++
		default:
			d.i++
		}
		if depth == 0 {
			// A scalar ends at the next delimiter; a container at its close.
			if c := d.b[start]; c == '{' || c == '[' || c == '"' {
				return d.b[start:d.i], nil
			}
			for d.i < len(d.b) && !isDelim(d.b[d.i]) {
				d.i++
			}
			return d.b[start:d.i], nil
		}
		if depth < 0 {
			return nil, d.fail("unbalanced brackets")
		}
	}
	return nil, d.fail("unexpected end")
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// raw reads a value kept as raw JSON, exactly as written (null included,
// as encoding/json keeps it).
func (d *envDecoder) raw() (json.RawMessage, error) {
	v, err := d.skipValid()
	if err != nil {
		return nil, err
	}
	return json.RawMessage(v), nil
}

// skipValid skips a value and checks it is valid JSON.
func (d *envDecoder) skipValid() ([]byte, error) {
	v, err := d.skip()
	if err != nil {
		return nil, err
	}
	if !validJSON(v) {
		return nil, d.fail("invalid JSON value")
	}
	return v, nil
}

// number reads a JSON number's text; null gives "".
func (d *envDecoder) number() (string, error) {
	if d.null() {
		return "", nil
	}
	v, err := d.skip()
	if err != nil {
		return "", err
	}
	if !isJSONNumber(v) {
		return "", d.fail("expected a number")
	}
	return string(v), nil
}

// isJSONNumber checks v against JSON's number grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func isJSONNumber(v []byte) bool {
	i := 0
	if i < len(v) && v[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(v) && v[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(v) && v[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(v)
}

func (d *envDecoder) uint64() (uint64, error) {
	s, err := d.number()
	if err != nil || s == "" {
		return 0, err
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, d.fail("expected an unsigned integer, got " + s)
	}
	return n, nil
}

func (d *envDecoder) int() (int, bool, error) {
	s, err := d.number()
	if err != nil || s == "" {
		return 0, s != "", err
	}
	n, err := strconv.ParseInt(s, 10, 0)
	if err != nil {
		return 0, true, d.fail("expected an integer, got " + s)
	}
	return int(n), true, nil
}

func (d *envDecoder) bool() (bool, bool, error) {
	if d.null() {
		return false, false, nil
	}
	d.ws()
	switch {
	case len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "true":
		d.i += 4
		return true, true, nil
	case len(d.b)-d.i >= 5 && string(d.b[d.i:d.i+5]) == "false":
		d.i += 5
		return false, true, nil
	}
	return false, false, d.fail("expected a boolean")
}

// time reads a time the way time.Time.UnmarshalJSON does.
func (d *envDecoder) time(t *time.Time) error {
	if d.null() {
		return nil
	}
	d.ws()
	start := d.i
	if _, err := d.str(); err != nil {
		return err
	}
	if err := t.UnmarshalJSON(d.b[start:d.i]); err != nil {
		return fmt.Errorf("envelope: %w", err)
	}
	return nil
}

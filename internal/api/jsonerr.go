package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"reflect"
	"strconv"
	"strings"
)

// jsonProblem says what encoding/json refused, in the API's words (the one
// place that does, for every body and payload): where the text stops being
// JSON, or which field — by its JSON path in body, commands[1].expected_version
// — holds what kind of value, and what it must be. Without body (a payload
// decoded elsewhere) the path is encoding/json's, without indexes. An error
// that is not encoding/json's keeps its text, without Go package prefixes.
func jsonProblem(err error, body []byte) string {
	var se *json.SyntaxError
	var ute *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		reason := se.Error()
		// "invalid character 'o' in literal null (expecting 'u')": the
		// literal is the decoder's guess at what was meant.
		if rest, ok := strings.CutPrefix(reason, "invalid character "); ok {
			if ch, _, ok := strings.Cut(rest, " "); ok {
				reason = "unexpected " + ch
			}
		}
		return fmt.Sprintf("not valid JSON at byte %d: %s", se.Offset, reason)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "not valid JSON: it ends early"
	case errors.Is(err, io.EOF):
		return "empty: send a JSON object"
	case errors.As(err, &ute):
		return typeProblem(ute, body)
	}
	return userMessage(err.Error())
}

// typeProblem words a value of the wrong kind: `field "budget" must be a
// whole number from … to …, got 1e30`.
func typeProblem(ute *json.UnmarshalTypeError, body []byte) string {
	path := ute.Field
	if body != nil {
		if p, ok := jsonPathAt(body, ute.Offset); ok {
			path = p
		}
	}
	what := "the body"
	if path != "" {
		what = fmt.Sprintf("field %q", path)
	}
	t := ute.Type
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	number, isNumber := strings.CutPrefix(ute.Value, "number ")
	if !isNumber {
		return fmt.Sprintf("%s must be %s, got %s", what, typeKind(t.String()), article(ute.Value))
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if !whole(number) {
			return fmt.Sprintf("%s must be a whole number, got %s", what, number)
		}
		return fmt.Sprintf("%s is out of range: must be a whole number from %d to %d, got %s",
			what, int64(-1)<<(t.Bits()-1), int64(1)<<(t.Bits()-1)-1, number)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if !whole(number) || strings.HasPrefix(number, "-") {
			return fmt.Sprintf("%s must be a whole number, 0 or more, got %s", what, number)
		}
		return fmt.Sprintf("%s is out of range: must be a whole number from 0 to %d, got %s", what, ^uint64(0)>>(64-t.Bits()), number)
	case reflect.Float32, reflect.Float64:
		return fmt.Sprintf("%s is out of range for a number, got %s", what, number)
	}
	return fmt.Sprintf("%s must be %s, got a number (%s)", what, typeKind(t.String()), number)
}

// whole reports whether the JSON number text is an integer (1e3 is, 1.5
// is not).
func whole(number string) bool {
	f, _, err := big.ParseFloat(number, 10, 256, big.ToNearestEven)
	return err == nil && f.IsInt()
}

// jsonPathAt is the JSON path of the value encoding/json was reading when
// it stopped at offset (just past a scalar, or past a container's opening
// bracket): "" for the body itself, then key, .key and [index].
func jsonPathAt(body []byte, offset int64) (string, bool) {
	type open struct {
		object bool
		key    string // object: the key whose value comes next
		keyed  bool   // object: a key was read, its value is next
		index  int    // array: the index of the next element
		path   string
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var stack []*open
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		var top *open
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				stack[len(stack)-1].keyed = false
			}
			continue
		}
		if top != nil && top.object && !top.keyed {
			top.key, _ = tok.(string)
			top.keyed = true
			continue
		}
		path := ""
		switch {
		case top == nil:
		case top.object:
			path = top.key
			if top.path != "" {
				path = top.path + "." + top.key
			}
			top.keyed = false
		default:
			path = top.path + "[" + strconv.Itoa(top.index) + "]"
			top.index++
		}
		if dec.InputOffset() == offset {
			return path, true
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, &open{object: d == '{', path: path})
		}
	}
}

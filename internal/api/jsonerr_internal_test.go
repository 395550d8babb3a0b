package api

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestJSONProblemSpeaksJSONWithTheFieldsPath pins the one wording of
// encoding/json's errors: the field by its JSON path (indexes and map keys
// included), what it must be, and the value as written — never Go's types.
func TestJSONProblemSpeaksJSONWithTheFieldsPath(t *testing.T) {
	type event struct {
		Type string `json:"type"`
		N    uint64 `json:"n"`
	}
	type body struct {
		After  *uint64          `json:"after"`
		Budget int64            `json:"budget"`
		Small  int8             `json:"small"`
		Events []event          `json:"events"`
		ByKey  map[string]event `json:"by_key"`
	}
	for _, c := range []struct{ body, want string }{
		{`{"after":-5}`, `field "after" must be a whole number, 0 or more, got -5`},
		{`{"budget":1e30}`, `field "budget" is out of range: must be a whole number from -9223372036854775808 to 9223372036854775807, got 1e30`},
		{`{"budget":1.5}`, `field "budget" must be a whole number, got 1.5`},
		{`{"small":300}`, `field "small" is out of range: must be a whole number from -128 to 127, got 300`},
		{`{"budget":"lots"}`, `field "budget" must be a number, got a string`},
		{`{"events":[{"type":"a"},{"n":-1}]}`, `field "events[1].n" must be a whole number, 0 or more, got -1`},
		{`{"events":[{"type":"a"},{"type":5}]}`, `field "events[1].type" must be a string, got a number`},
		{`{"by_key":{"k":{"n":"s"}}}`, `field "by_key.k.n" must be a number, got a string`},
		{`{"events":{}}`, `field "events" must be an array, got an object`},
		{`[1]`, `the body must be an object, got an array`},
		{`not json`, `not valid JSON at byte 2: unexpected 'o'`},
		{`{"after":`, `not valid JSON: it ends early`},
		{``, `empty: send a JSON object`},
	} {
		dec := json.NewDecoder(bytes.NewReader([]byte(c.body)))
		var b body
		err := dec.Decode(&b)
		if err == nil {
			t.Fatalf("%s decoded", c.body)
		}
		got := jsonProblem(err, []byte(c.body))
		if got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.body, got, c.want)
		}
		if strings.Contains(got, "Go ") || strings.Contains(got, "int64") || strings.Contains(got, "literal null") {
			t.Errorf("%s: %q speaks Go", c.body, got)
		}
	}
}

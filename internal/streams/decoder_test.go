package streams

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// hasDuplicateKeys reports whether any object in data repeats a key
// (case-insensitively). encoding/json then decodes into the values the
// earlier key left behind, a corner the hand-written decoder does not copy.
func hasDuplicateKeys(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		obj    bool
		keys   map[string]bool
		expKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.expKey {
			if k, ok := tok.(string); ok {
				lk := strings.ToLower(k)
				if top.keys[lk] {
					return true
				}
				top.keys[lk] = true
				top.expKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, keys: map[string]bool{}, expKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].expKey = true
		}
	}
}

// FuzzDecoderMatchesEncodingJSON holds the hand-written envelope decoder to
// encoding/json: the same inputs accepted, the same values produced.
func FuzzDecoderMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"id":"a","aggregate_type":"t","aggregate_id":"i","events":[{"id":"e","type":"x","schema":1,"version":1,"time":"2026-01-02T03:04:05.123Z","data":{"k":[1,2,"\u00e9"]}}],"commands":[{"id":"c","kind":"k","payload":null,"report":true,"deliver_after":"2026-01-02T03:04:05Z"}],"correlation_id":"c\"q"}`,
		`{"V":1,"ID":"a","Events":[{"TYPE":"x","Version":2}]}`,
		`{"v":"1"}`, `{"v":1.5}`, `{"events":[null]}`, `{"events":{}}`, `null`, `[]`, `{"x":{"y":[tru]}}`,
		`{"events":[{"version":-1}]}`, `{"events":[{"schema":-3,"data":"s"}]}`, `{"events":[{"time":5}]}`,
		`{"commands":[{"report":"true"}]}`, `{"id":"\ud800"}`, `{"id":"\xff"}`, ` {"v" : 1 } `, `{"v":1}x`,
		`{"events":[{"data":null}]}`, `{"events":null,"commands":[]}`, `{"v":18446744073709551616}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var std, got envelope
		stdErr := json.Unmarshal(data, &std)
		gotErr := decodeEnvelope(data, &got)
		if hasDuplicateKeys(data) {
			return
		}
		switch {
		case stdErr == nil && gotErr != nil:
			t.Fatalf("encoding/json accepts, decoder refuses (%v): %q", gotErr, data)
		case stdErr != nil && gotErr == nil:
			t.Fatalf("encoding/json refuses (%v), decoder accepts: %q", stdErr, data)
		case stdErr == nil && !reflect.DeepEqual(std, got):
			t.Fatalf("values differ for %q:\n std %#v\n got %#v", data, std, got)
		}
	})
}

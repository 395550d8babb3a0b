package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/internal/api"
)

func TestCheckDuplicateKeys_NamesTheKeyAndItsObject(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"a":1,"a":2}`:                                 `key "a" twice in the object at $`,
		`{"a":{"b":1,"c":[1,{"d":1,"d":2}]}}`:           `key "d" twice in the object at $.a.c[1]`,
		`{"commands":[{"id":"x"},{"id":"y","id":"z"}]}`: `key "id" twice in the object at $.commands[1]`,
		`{"":1,"":2}`:                                   `key "" twice in the object at $`,
		`{"a\u0062":1,"ab":2}`:                          `key "ab" twice`, // the same key once decoded
		`[{"x":1},{"x":1,"y":{"x":1},"x":3}]`:           `key "x" twice in the object at $[1]`,
		`{"traveler":"ada","TRAVELER":"eve"}`:           `key "TRAVELER" twice in the object at $`, // encoding/json would read one
		`{"A":1,"a":2}`:                                 `key "a" twice`,
		`{"status":"a","ſtatus":"b"}`:                   `key "ſtatus" twice`, // U+017F folds to s in encoding/json
	} {
		err := api.CheckDuplicateKeys([]byte(body))
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != "duplicate_key" || !strings.Contains(ae.Message, want) {
			t.Errorf("%s: %v, want 400 duplicate_key saying %q", body, err, want)
		}
	}
	for _, body := range []string{
		``, `null`, `1`, `"a"`, `[]`, `{}`, `{"a":1,"b":{"a":1},"c":[{"a":1},{"a":2}]}`,
		`{"a":"a","b":"a"}`,   // values may repeat
		`not json`, `{"a":1,`, // not JSON: the decoder's to refuse
	} {
		if err := api.CheckDuplicateKeys([]byte(body)); err != nil {
			t.Errorf("%s: %v, want nil", body, err)
		}
	}
}

// FuzzCheckDuplicateKeys checks the token walk against a reference that
// shares none of its code: in valid JSON every ':' outside a string is one
// object member, and decoding to any keeps one member per distinct key, so
// the text has a duplicate exactly when it has more colons than the decoded
// value has members (keys folded to lower case).
func FuzzCheckDuplicateKeys(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"a":1}}`, `[{"a":1},{"a":1}]`, `{"a:":"b:","a":1}`,
		`{"\"":1,"\u0022":2}`, `{"a":[1,2,{"b":null,"c":{"b":1,"b":true}}]}`, `{}`, `"x:y"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v any
		if json.Unmarshal(body, &v) != nil {
			_ = api.CheckDuplicateKeys(body) // must not panic
			return
		}
		want := colonsOutsideStrings(body) > members(v)
		err := api.CheckDuplicateKeys(body)
		if got := err != nil; got != want {
			t.Fatalf("%q: duplicate %v (%v), reference says %v", body, got, err, want)
		}
		if err != nil && !strings.Contains(err.Error(), "twice in the object at $") {
			t.Fatalf("%q: the fast walk found a duplicate the naming walk did not: %v", body, err)
		}
	})
}

func colonsOutsideStrings(b []byte) int {
	n, in, esc := 0, false, false
	for _, c := range b {
		switch {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && c == ':':
			n++
		}
	}
	return n
}

func members(v any) int {
	switch v := v.(type) {
	case map[string]any:
		folded := map[string]bool{} // keys encoding/json would match alike are one
		for k := range v {
			folded[jsonFold(k)] = true
		}
		n := len(folded)
		for _, c := range v {
			n += members(c)
		}
		return n
	case []any:
		n := 0
		for _, c := range v {
			n += members(c)
		}
		return n
	}
	return 0
}

// A key twice in any body the API takes is refused 400 duplicate_key on
// both surfaces, and nothing is written: commands, raw appends, multi.
func TestDuplicateKeys_RefusedOnBothSurfacesAndNothingWritten(t *testing.T) {
	t.Parallel()
	e := start(t)
	cmd := `{"traveler":"ada","destination":"Lisbon","budget":100000,"budget":1,"flight_price":40000,"hotel_price":30000}`
	raw := `{"events":[{"type":"invoice_sent","data":{"n":1}}],"events":[]}`
	multi := `{"commands":[{"type":"trip","id":"dup-m","command":"request_trip","command":"cancel_trip","payload":{}}]}`
	for _, s := range e.surfaces() {
		before := e.eventsCount(t)
		failed(t, s.Send(t, trip.Type, "dup-"+s.Name(), trip.KindRequestTrip, []byte(cmd), nil), 400, "duplicate_key")
		failed(t, s.RawAppend(t, rawType, "dup-"+s.Name(), []byte(raw), nil), 400, "duplicate_key")
		e.wantUnchanged(t, before)
	}
	before := e.eventsCount(t)
	failed(t, e.http.do(t, http.MethodPost, "/v1/multi", strings.NewReader(multi), nil), 400, "duplicate_key")
	failed(t, e.nats.request(t, "esjet."+ns+".multi", []byte(multi), nil), 400, "duplicate_key")
	// An operator action's body on NATS too (checked before the action runs).
	failed(t, e.nats.request(t, "esjet."+ns+".ops.oncall.dlq.discard", []byte(`{"seq":1,"seq":2}`), nil), 400, "duplicate_key")
	e.wantUnchanged(t, before)
}

// An object with many keys is checked through a set, not pairwise: a
// megabyte of distinct keys stays fast, and a duplicate at the end is found.
func TestCheckDuplicateKeys_ManyKeys(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("{")
	for i := range 100_000 {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	distinct := b.String() + `"end":0}`
	start := time.Now()
	if err := api.CheckDuplicateKeys([]byte(distinct)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("100,000 distinct keys took %s", d)
	}
	if err := api.CheckDuplicateKeys([]byte(b.String() + `"k5":0}`)); err == nil || !strings.Contains(err.Error(), `"k5"`) {
		t.Errorf("a duplicate after 100,000 keys: %v", err)
	}
}

func BenchmarkCheckDuplicateKeys(b *testing.B) {
	body := []byte(`{"traveler":"ada","destination":"Lisbon","budget":100000,"flight_price":40000,"hotel_price":30000}`)
	b.ReportAllocs()
	for b.Loop() {
		_ = api.CheckDuplicateKeys(body)
	}
}

// jsonFold is how encoding/json decides that a key names a field: the
// reference's own copy (bytes.EqualFold's rule), not the API's code.
func jsonFold(k string) string {
	var b strings.Builder
	for _, r := range k {
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		b.WriteRune(r)
	}
	return b.String()
}

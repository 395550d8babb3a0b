package streams

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/wire"
)

// fillAll sets every field of v (a pointer to a struct) to a non-zero value,
// so a field added to Decision, Event or Command later shows up here.
func fillAll(t *testing.T, v reflect.Value) {
	t.Helper()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x<&>\"é" + v.Type().Field(i).Name)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64:
			f.SetInt(7)
		case reflect.Uint64:
			f.SetUint(9)
		case reflect.Slice:
			switch f.Type().Elem().Kind() {
			case reflect.Uint8: // json.RawMessage
				f.SetBytes([]byte(`{"k":[1,"<&>",true]}`))
			case reflect.Struct:
				s := reflect.MakeSlice(f.Type(), 2, 2)
				for j := range 2 {
					fillAll(t, s.Index(j))
				}
				f.Set(s)
			default:
				t.Fatalf("fillAll: unhandled slice %s", f.Type())
			}
		case reflect.Struct:
			if f.Type() == reflect.TypeFor[time.Time]() {
				f.Set(reflect.ValueOf(time.Date(2026, 11, 30, 7, 1, 2, 345678900, time.UTC)))
				continue
			}
			t.Fatalf("fillAll: unhandled struct %s", f.Type())
		default:
			t.Fatalf("fillAll: unhandled kind %s of %s", f.Kind(), v.Type().Field(i).Name)
		}
	}
}

// TestEncoderMatchesEncodingJSON pins the hand-written encoder to what
// encoding/json writes for the envelope, for every field: forget a new
// field in appendEnvelope and this fails.
func TestEncoderMatchesEncodingJSON(t *testing.T) {
	var d Decision
	fillAll(t, reflect.ValueOf(&d).Elem())
	want, err := json.Marshal(envelope{V: wire.EnvelopeVersion, Decision: d})
	if err != nil {
		t.Fatal(err)
	}
	got, err := appendEnvelope(nil, d)
	if err != nil {
		t.Fatal(err)
	}
	var gotV, wantV any
	if err := json.Unmarshal(got, &gotV); err != nil {
		t.Fatalf("encoder output is not JSON: %v\n%s", err, got)
	}
	_ = json.Unmarshal(want, &wantV)
	if !reflect.DeepEqual(gotV, wantV) {
		t.Fatalf("encoder differs from encoding/json:\n got %s\nwant %s", got, want)
	}
	// And the minimal decision (omitempty fields absent) too.
	min := Decision{ID: "id", AggregateType: "t", AggregateID: "i", Events: []Event{{Type: "e", Version: 1}}}
	want, _ = json.Marshal(envelope{V: wire.EnvelopeVersion, Decision: min})
	got, _ = appendEnvelope(nil, min)
	_ = json.Unmarshal(got, &gotV)
	_ = json.Unmarshal(want, &wantV)
	if !reflect.DeepEqual(gotV, wantV) {
		t.Fatalf("minimal decision differs:\n got %s\nwant %s", got, want)
	}
}

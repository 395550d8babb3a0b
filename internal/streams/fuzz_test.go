package streams

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/wire"
)

// FuzzDecode feeds arbitrary bytes to Decode. It must never panic, and what
// it accepts must survive encode → Decode unchanged: a reader and a writer of
// the same build agree on every decision either can produce.
// Seed corpus: testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		d1, err := Decode(data)
		if err != nil {
			return
		}
		// What Decode accepts satisfies the invariants encode relies on.
		if d1.ID == "" || len(d1.Events) == 0 || d1.Events[0].Version == 0 {
			t.Fatalf("Decode accepted %+v", d1)
		}
		m, err := encode("ns.evt."+d1.AggregateType+"."+d1.AggregateID, d1)
		if err != nil {
			// Decode read every value from JSON: writing it back must work.
			t.Fatalf("encode of a decoded decision failed: %v\ninput %q", err, data)
		}
		d2, err := Decode(m.Data)
		if err != nil {
			t.Fatalf("re-encoded decision does not decode: %v\ninput   %q\nencoded %q", err, data, m.Data)
		}
		if !decisionsEqual(t, d1, d2) {
			t.Fatalf("decode → encode → decode changed the decision\ninput %q\nfirst  %+v\nsecond %+v", data, d1, d2)
		}
	})
}

// decisionsEqual compares two decisions the way a reader sees them: times as
// instants with their offset (JSON keeps the offset, not the *time.Location),
// raw JSON as the value encoding/json writes for it (compacted,
// HTML-escaped). Every other field, present or future, must be identical.
func decisionsEqual(t *testing.T, a, b Decision) bool {
	t.Helper()
	timeEq := func(x, y time.Time) bool {
		if x.IsZero() && y.IsZero() {
			return true // omitzero drops a zero time whatever its zone
		}
		_, ox := x.Zone()
		_, oy := y.Zone()
		return x.Equal(y) && ox == oy
	}
	if len(a.Events) != len(b.Events) || len(a.Commands) != len(b.Commands) {
		return false
	}
	for i := range a.Events {
		if !timeEq(a.Events[i].Time, b.Events[i].Time) {
			return false
		}
	}
	for i := range a.Commands {
		if !timeEq(a.Commands[i].DeliverAfter, b.Commands[i].DeliverAfter) {
			return false
		}
	}
	return reflect.DeepEqual(normalized(t, a), normalized(t, b))
}

// normalized returns a copy of d without times and with raw JSON re-marshaled.
func normalized(t *testing.T, d Decision) Decision {
	t.Helper()
	raw := func(m json.RawMessage) json.RawMessage {
		if len(m) == 0 {
			return nil
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("raw JSON %q no longer marshals: %v", m, err)
		}
		return out
	}
	d.Events = slices.Clone(d.Events)
	for i := range d.Events {
		d.Events[i].Time = time.Time{}
		d.Events[i].Data = raw(d.Events[i].Data)
	}
	if len(d.Commands) == 0 {
		d.Commands = nil // "commands":[] and an absent list are the same decision
	}
	d.Commands = slices.Clone(d.Commands)
	for i := range d.Commands {
		d.Commands[i].DeliverAfter = time.Time{}
		d.Commands[i].Payload = raw(d.Commands[i].Payload)
	}
	return d
}

var tokenOracle = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// FuzzValidateToken checks wire.ValidateToken against a regular expression of the
// documented rule. Seed corpus: testdata/fuzz/FuzzValidateToken.
func FuzzValidateToken(f *testing.F) {
	f.Fuzz(func(t *testing.T, value string) {
		err := wire.ValidateToken("aggregate id", value)
		want := tokenOracle.MatchString(value)
		if want && err != nil {
			t.Fatalf("wire.ValidateToken(%q) = %v, but it matches %s", value, err, tokenOracle)
		}
		if !want {
			var te *wire.TokenError
			if !errors.As(err, &te) || !errors.Is(err, wire.ErrInvalidToken) || te.Value != value {
				t.Fatalf("wire.ValidateToken(%q) = %v, want a *wire.TokenError: it does not match %s", value, err, tokenOracle)
			}
			_ = te.Error() // formatting any value must not panic
		}
	})
}

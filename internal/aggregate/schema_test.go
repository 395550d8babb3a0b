package aggregate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/streams"
)

func renameTo(to string) UpcastFunc {
	return func(data json.RawMessage) (json.RawMessage, error) {
		var v map[string]any
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, err
		}
		for k, x := range v {
			delete(v, k)
			v[to] = x
		}
		return json.Marshal(v)
	}
}

func schemaDef() *Def[int] {
	return Define("acct", 1, func(s int, e Event) int { return s + 1 })
}

// TestUpcastRegistrationRefusesMistakes: a version ≤ 0, a step registered
// twice and a gap panic at registration, each saying what to do.
func TestUpcastRegistrationRefusesMistakes(t *testing.T) {
	for _, c := range []struct {
		name  string
		steps []int
		want  string
	}{
		{"zero", []int{0}, "versions start at 1"},
		{"negative", []int{-1}, "versions start at 1"},
		{"duplicate", []int{1, 1}, "already registered"},
		{"gap", []int{1, 3}, "leaves a gap"},
		{"gap from the start", []int{2}, "register the step from 1 to 2 first"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				p := recover()
				if p == nil || !strings.Contains(p.(string), c.want) {
					t.Fatalf("panic %v, want one saying %q", p, c.want)
				}
			}()
			def := schemaDef()
			for _, from := range c.steps {
				Upcast(def, "opened", from, renameTo("x"))
			}
		})
	}
}

// TestUpcastChainsToCurrent: an event of version 1 runs every step up to
// the current version; a current one runs none; a newer one is refused
// with a SchemaError, never passed on.
func TestUpcastChainsToCurrent(t *testing.T) {
	def := schemaDef()
	Upcast(def, "opened", 1, renameTo("b"))
	Upcast(def, "opened", 2, renameTo("c"))
	d := def.Definition()
	if got := d.EventSchema("opened"); got != 3 {
		t.Fatalf("EventSchema(opened) = %d, want 3", got)
	}
	if got := d.EventSchema("closed"); got != 1 {
		t.Fatalf("EventSchema(closed) = %d, want 1 (no upcasters)", got)
	}
	for _, c := range []struct {
		schema int
		want   string
	}{{0, `{"c":1}`}, {1, `{"c":1}`}, {2, `{"c":1}`}, {3, `{"a":1}`}} {
		e, err := d.upcast(streams.Event{Type: "opened", Schema: c.schema, Data: json.RawMessage(`{"a":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		if string(e.Data) != c.want || e.Schema != 3 {
			t.Errorf("schema %d: upcast to %s schema %d, want %s schema 3", c.schema, e.Data, e.Schema, c.want)
		}
	}
	_, err := d.upcast(streams.Event{Type: "opened", Schema: 4, Data: json.RawMessage(`{"a":1}`)})
	var se *SchemaError
	if !errors.As(err, &se) || !errors.Is(err, ErrSchemaTooNew) || se.Schema != 4 || se.Known != 3 {
		t.Fatalf("schema 4 of a type at 3: %v, want a SchemaError (4, known 3)", err)
	}
	_, err = d.upcast(streams.Event{Type: "closed", Schema: 2})
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("schema 2 of a type without upcasters: %v, want ErrSchemaTooNew", err)
	}
}

// TestStampWritesTheCurrentVersion: decisions record each event type's
// current version; a Decide that names another is a contract break.
func TestStampWritesTheCurrentVersion(t *testing.T) {
	def := schemaDef()
	Upcast(def, "opened", 1, renameTo("b"))
	d := def.Definition()
	sd := streams.Decision{Events: []streams.Event{{Type: "opened"}, {Type: "closed"}}}
	if err := d.stamp(&sd); err != nil {
		t.Fatal(err)
	}
	if sd.Events[0].Schema != 2 || sd.Events[1].Schema != 1 {
		t.Fatalf("stamped schemas %d, %d; want 2, 1", sd.Events[0].Schema, sd.Events[1].Schema)
	}
	sd = streams.Decision{Events: []streams.Event{{Type: "opened", Schema: 1}}}
	if err := d.stamp(&sd); !errors.Is(err, ErrInvalidDecision) {
		t.Fatalf("an event that says an old schema: %v, want ErrInvalidDecision", err)
	}
}

// TestRawTransforms: the configured steps rename, default and remove top
// level fields, in that order, and chain like Go upcasters.
func TestRawTransforms(t *testing.T) {
	raw, err := RawUpcasts(map[string]config.RawType{"invoice": {Events: map[string]config.RawEvent{"issued": {Upcast: []config.Transform{
		{Rename: map[string]string{"amt": "amount"}, Default: map[string]any{"currency": "EUR"}},
		{Remove: []string{"legacy"}, Default: map[string]any{"lines": []any{}}},
	}}}}})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistry(schemaDef().Definition())
	if err != nil {
		t.Fatal(err)
	}
	u, err := NewUpcasters(reg, raw)
	if err != nil {
		t.Fatal(err)
	}
	e, err := u.Upcast("invoice", streams.Event{Type: "issued", Schema: 1, Data: json.RawMessage(`{"amt":5,"legacy":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"amount":5,"currency":"EUR","lines":[]}`; string(e.Data) != want || e.Schema != 3 {
		t.Fatalf("upcast to %s schema %d, want %s schema 3", e.Data, e.Schema, want)
	}
	if _, err := u.Upcast("invoice", streams.Event{Type: "issued", Schema: 4}); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("a raw event newer than the configuration: %v, want ErrSchemaTooNew", err)
	}
	if e, err := u.Upcast("invoice", streams.Event{Type: "paid", Schema: 7}); err != nil || e.Schema != 7 {
		t.Fatalf("a raw event type the configuration does not name: %v, %+v; want it as stored", err, e)
	}
	if _, err := NewUpcasters(reg, map[string]map[string][]UpcastFunc{"acct": {}}); err == nil {
		t.Fatal("configured upcasters for a type registered in Go: no error")
	}
}

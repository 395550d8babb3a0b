package aggregate

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// UpcastFunc turns an event's data of schema version n into version n+1.
// It must be pure: every read of the event calls it again.
type UpcastFunc func(data json.RawMessage) (json.RawMessage, error)

// ErrSchemaTooNew is wrapped by [*SchemaError]: a stored event's schema
// version is newer than this node's definition knows. The node refuses to
// read it rather than guess: the aggregate's commands fail until a node that
// knows the version serves them. The API answers 503 schema_too_new.
var ErrSchemaTooNew = errors.New("aggregate: event schema version newer than this node knows")

// SchemaError names the event a node met whose schema version it does not
// know. It wraps [ErrSchemaTooNew].
type SchemaError struct {
	AggregateType string
	EventType     string
	Schema        int // the stored event's version
	Known         int // the newest version this node knows
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("event %s of aggregate type %s has schema version %d, newer than this node knows (%d): "+
		"it was written by a newer build; serve this aggregate from a node that defines version %d (upgrade this node), the node refuses rather than guess",
		e.EventType, e.AggregateType, e.Schema, e.Known, e.Schema)
}

func (e *SchemaError) Unwrap() error { return ErrSchemaTooNew }

// upcasts are an event type's upcasters: steps[i] turns version i+1 into
// i+2, so the current version is len(steps)+1.
type upcasts struct{ steps []UpcastFunc }

func (u *upcasts) current() int {
	if u == nil {
		return 1
	}
	return len(u.steps) + 1
}

// Upcast registers fn, which turns eventType's data of schema version from
// into version from+1, on the aggregate type: the event type's current
// version becomes from+1, decisions record it, and every read of an older
// event runs the chain of upcasters up to it. Register the steps in order,
// from 1: a version ≤ 0, a step registered twice or a gap panics (a
// definition is code: the mistake shows when the program starts).
func Upcast[S any](def *Def[S], eventType string, from int, fn UpcastFunc) *Def[S] {
	def.d.addUpcast(eventType, from, fn)
	return def
}

func (d *Definition) addUpcast(eventType string, from int, fn UpcastFunc) {
	if err := wire.ValidateToken("event type", eventType); err != nil {
		panic(fmt.Sprintf("aggregate.Upcast(%s): %v", d.typ, err))
	}
	if fn == nil {
		panic(fmt.Sprintf("aggregate.Upcast(%s, %s, %d): the upcaster is nil", d.typ, eventType, from))
	}
	if d.events == nil {
		d.events = map[string]*upcasts{}
	}
	u := d.events[eventType]
	if err := checkStep(eventType, from, u.current()); err != nil {
		panic(fmt.Sprintf("aggregate.Upcast(%s): %v", d.typ, err))
	}
	if u == nil {
		u = &upcasts{}
		d.events[eventType] = u
	}
	u.steps = append(u.steps, fn)
}

// checkStep says what is wrong with a step from → from+1 registered for an
// event type that is at version current.
func checkStep(eventType string, from, current int) error {
	switch {
	case from <= 0:
		return fmt.Errorf("event %s: an upcaster goes from version %d, but versions start at 1 (the first upcaster goes from 1 to 2)", eventType, from)
	case from < current:
		return fmt.Errorf("event %s: an upcaster from version %d to %d is already registered; register each step once", eventType, from, from+1)
	case from > current:
		return fmt.Errorf("event %s: an upcaster from version %d leaves a gap: the event is at version %d, register the step from %d to %d first", eventType, from, current, current, current+1)
	}
	return nil
}

// EventSchema is eventType's current schema version: what decisions record
// and what reads upcast to (1 for an event type without upcasters).
func (d *Definition) EventSchema(eventType string) int { return d.events[eventType].current() }

// EventSchemas lists the event types with upcasters and their current
// versions.
func (d *Definition) EventSchemas() map[string]int {
	out := make(map[string]int, len(d.events))
	for t, u := range d.events {
		out[t] = u.current()
	}
	return out
}

// upcast brings e to its type's current version, or refuses an event newer
// than that with a [*SchemaError].
func (d *Definition) upcast(e streams.Event) (streams.Event, error) {
	return upcastEvent(d.typ, e, d.events[e.Type])
}

// upcastEvent runs the steps of u from e's version to the current one.
func upcastEvent(aggType string, e streams.Event, u *upcasts) (streams.Event, error) {
	v := max(e.Schema, 1)
	cur := u.current()
	if v > cur {
		return e, &SchemaError{AggregateType: aggType, EventType: e.Type, Schema: v, Known: cur}
	}
	if v < cur {
		e.StoredSchema = v
	}
	for ; v < cur; v++ {
		data, err := u.steps[v-1](e.Data)
		if err != nil {
			return e, fmt.Errorf("upcast %s/%s event %s from schema %d to %d: %w", aggType, e.Type, e.ID, v, v+1, err)
		}
		e.Data = data
	}
	e.Schema = cur
	return e, nil
}

// stamp sets each event of sd to its type's current schema version. An
// event whose Decide gave another version is a contract break: decisions
// record the current shape only.
func (d *Definition) stamp(sd *streams.Decision) error {
	for i := range sd.Events {
		e := &sd.Events[i]
		cur := d.EventSchema(e.Type)
		if e.Schema != 0 && e.Schema != cur {
			return fmt.Errorf("%w: %s event %d (%s) says schema %d, but the type's current version is %d (set by its upcasters); leave NewEvent.Schema 0",
				ErrInvalidDecision, d.typ, i, e.Type, e.Schema, cur)
		}
		e.Schema = cur
	}
	return nil
}

// Upcasters is how a node reads events: each aggregate type's upcasters —
// a registered type's, else the raw ones given for it — brought to the
// current version of every event type, or refused as too new.
type Upcasters struct {
	reg *Registry
	raw map[string]map[string]*upcasts
}

// NewUpcasters reads events of reg's types through their definitions' upcasters
// and those of raw types through raw (per type, per event type, the steps from
// version 1 in order). An event of a raw type without an entry is read as
// stored.
func NewUpcasters(reg *Registry, raw map[string]map[string][]UpcastFunc) (*Upcasters, error) {
	u := &Upcasters{reg: reg, raw: map[string]map[string]*upcasts{}}
	for _, typ := range sortedKeys(raw) {
		if _, err := reg.Get(typ); err == nil {
			return nil, fmt.Errorf("aggregate type %s has upcasters in the configuration (aggregates.raw) and is registered in Go: define its upcasters in Go", typ)
		}
		u.raw[typ] = map[string]*upcasts{}
		for et, steps := range raw[typ] {
			u.raw[typ][et] = &upcasts{steps: steps}
		}
	}
	return u, nil
}

// Upcast is a [streams.Upcaster]: it brings e, of aggregate type typ, to the
// current version of its type, or returns a [*SchemaError].
func (u *Upcasters) Upcast(typ string, e streams.Event) (streams.Event, error) {
	if def, ok := u.reg.defs[typ]; ok {
		return def.upcast(e)
	}
	evs, ok := u.raw[typ]
	if !ok {
		return e, nil // a raw type: its writers own its shapes
	}
	steps, ok := evs[e.Type]
	if !ok {
		return e, nil
	}
	return upcastEvent(typ, e, steps)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TooNew marks the error as a refusal of an event too new to read
// ([streams.TooNew]).
func (e *SchemaError) TooNew() bool { return true }

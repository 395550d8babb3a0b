package shred

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/esjet/esjet/internal/wire"
)

// Field is a personal field of a JSON object: its member name and the
// member holding its data subject's id (which may be the field itself).
type Field struct {
	Name    string
	Subject string
}

// Spec lists the personal fields of one JSON object shape (top-level
// members only). The zero Spec seals nothing.
type Spec struct {
	Fields []Field
	// Schema is the schema version of the event whose member names Fields
	// are (a raw type's current one, when its configuration upcasts older
	// shapes); 0: any. An older shape may name a personal field otherwise,
	// and would reach the log in plaintext: the writer refuses it.
	Schema int
}

// Empty reports whether the spec seals nothing.
func (s Spec) Empty() bool { return len(s.Fields) == 0 }

var specs sync.Map // reflect.Type → Spec (or error)

// SpecOf returns the personal fields of v's Go type, read from its struct
// tags: `esjet:"personal,subject=<json name>"` on a field marks it
// personal, keyed by the data subject whose id is in the named member of
// the same struct (a string field; it may be the tagged field itself).
// A non-struct (or pointer to one) has an empty spec. A tag that names no
// string field of the struct is an error, reported where the value is used.
func SpecOf(v any) (Spec, error) {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return Spec{}, nil
	}
	if c, ok := specs.Load(t); ok {
		if err, bad := c.(error); bad {
			return Spec{}, err
		}
		return c.(Spec), nil
	}
	s, err := specOfType(t)
	if err != nil {
		specs.Store(t, err)
		return Spec{}, err
	}
	specs.Store(t, s)
	return s, nil
}

func specOfType(t reflect.Type) (Spec, error) {
	names := map[string]reflect.Type{} // json member → Go type
	var s Spec
	var subjects []string
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name := jsonName(f)
		if name == "-" {
			continue
		}
		names[name] = f.Type
		tag, ok := f.Tag.Lookup(wire.TagName)
		if !ok {
			continue
		}
		parts := strings.Split(tag, ",")
		if parts[0] != "personal" {
			return Spec{}, fmt.Errorf("shred: %s.%s: tag %s:%q: want \"personal,subject=<json name>\"", t, f.Name, wire.TagName, tag)
		}
		subject := ""
		for _, p := range parts[1:] {
			if v, ok := strings.CutPrefix(p, "subject="); ok {
				subject = v
			}
		}
		if subject == "" {
			return Spec{}, fmt.Errorf("shred: %s.%s: tag %s:%q names no subject: add subject=<json name of the field holding the data subject's id>", t, f.Name, wire.TagName, tag)
		}
		s.Fields = append(s.Fields, Field{Name: name, Subject: subject})
		subjects = append(subjects, subject)
	}
	for _, sub := range subjects {
		ft, ok := names[sub]
		if !ok || ft.Kind() != reflect.String {
			return Spec{}, fmt.Errorf("shred: %s: personal fields name subject %q, which is not a string field's JSON name in the struct", t, sub)
		}
	}
	return s, nil
}

func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		return f.Name
	}
	return name
}

// Registry holds the personal fields of raw types (config
// aggregates.personal), by "<aggregate type>.<event type or command kind>".
type Registry map[string]Spec

// Lookup returns the spec of kind (an event type or a command kind) of
// aggregate type typ.
func (r Registry) Lookup(typ, kind string) Spec { return r[typ+"."+kind] }

// Merge adds other's specs to r (a copy).
func (r Registry) Merge(other Registry) Registry {
	out := make(Registry, len(r)+len(other))
	for k, v := range r {
		out[k] = v
	}
	for k, v := range other {
		out[k] = Spec{Fields: slices.Clone(v.Fields), Schema: v.Schema}
	}
	return out
}

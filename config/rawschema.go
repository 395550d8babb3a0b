package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// RawEvent is how the events of one type of a raw aggregate type evolve:
// Upcast[i] turns schema version i+1 into i+2, so the current version is
// len(Upcast)+1. The node reads every older event through the steps
// (history, the log, views, the console), and refuses one newer than that.
type RawEvent struct {
	Upcast []Transform `yaml:"upcast"`
}

// Transform is one version step of a raw event's JSON object, applied in
// this order: Rename moves fields (a field already there under the new name
// is replaced), Default sets fields that are absent, Remove deletes fields.
// Top-level fields only (a name with '.' or '/' is refused as a path);
// anything else needs a Go upcaster (a registered type). An empty step is a version whose shape only grew.
type Transform struct {
	Rename  map[string]string `yaml:"rename"`
	Default map[string]any    `yaml:"default"`
	Remove  []string          `yaml:"remove"`
}

// validateEvents checks a raw type's event transforms: event types are
// tokens, fields are named, a step does not contradict itself.
func (r RawType) validateEvents(v *validator, field string) {
	for _, et := range slices.Sorted(maps.Keys(r.Events)) {
		if !kindPattern.MatchString(et) {
			v.add(field+".events", et, "an event type is 1-128 characters of A-Z, a-z, 0-9, '_' and '-'")
			continue
		}
		for i, t := range r.Events[et].Upcast {
			t.validate(v, fmt.Sprintf("%s.events.%s.upcast[%d]", field, et, i))
		}
	}
}

func (t Transform) validate(v *validator, path string) {
	targets := map[string]string{}
	for _, from := range slices.Sorted(maps.Keys(t.Rename)) {
		to := t.Rename[from]
		switch {
		case from == "" || to == "":
			v.add(path+".rename", from+": "+to, "name both fields: old_name: new_name")
		case isPath(from) || isPath(to):
			v.add(path+".rename", from+": "+to, nestedHint)
		case from == to:
			v.add(path+".rename", from, "renames a field to itself; drop it")
		case targets[to] != "":
			v.add(path+".rename", to, fmt.Sprintf("both %s and %s are renamed to it; rename one field to each name", targets[to], from))
		case slices.Contains(t.Remove, to):
			v.add(path+".remove", to, "is the new name of a renamed field; removing it loses the field")
		}
		targets[to] = from
	}
	for _, f := range slices.Sorted(maps.Keys(t.Default)) {
		if f == "" {
			v.add(path+".default", f, "name the field")
		} else if isPath(f) {
			v.add(path+".default", f, nestedHint)
		} else if slices.Contains(t.Remove, f) {
			v.add(path+".default", f, "is also removed in this step; set a default or remove it, not both")
		} else if _, err := json.Marshal(t.Default[f]); err != nil {
			v.add(path+".default."+f, t.Default[f], "is not a JSON value: "+err.Error())
		}
	}
	for _, f := range t.Remove {
		if f == "" {
			v.add(path+".remove", f, "name the field")
		} else if isPath(f) {
			v.add(path+".remove", f, nestedHint)
		}
	}
}

// nestedHint is what a transform naming a nested field is told: the steps
// see top-level fields only, and a name like "address.zip" would match no
// field and change nothing, silently.
const nestedHint = "is a path, and a step renames, sets and removes top-level fields only; a nested field needs a Go upcaster (register the type in Go: docs/schema-evolution.md)"

// isPath reports whether a transform's field name looks like a path into
// the object (a.b, /a/b) rather than one top-level field.
func isPath(name string) bool { return strings.ContainsAny(name, "./") }

package config

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// Archive moves closed aggregates out of the event log (docs/archiving.md):
// per aggregate type, a rule says when one is closed for good; `esjet
// archive run` (as an admin) moves each closed aggregate whose commands
// are all settled to the archive and leaves a tombstone with its state.
type Archive struct {
	// Types are the rules, by aggregate type (Go-defined or raw). Empty:
	// nothing is archived, and EVENTS denies purges. Set in the file only.
	// Configuring any type makes a new EVENTS allow purges (only the admin
	// role may purge); JetStream cannot allow them on an existing one.
	Types map[string]ArchiveRule `yaml:"types"`
	// Dir keeps the archive objects in this directory instead of the
	// namespace's object store bucket <ns>_archive. Every node that reads
	// archived history must see it. Default "": the bucket.
	Dir string `yaml:"dir"`
	// Every is how often the nodes archive by themselves: a pass (what
	// `esjet archive run` does) starts this long after the last one ended,
	// on one node of the fleet at a time, and one cut by a kill is resumed
	// by the next node within a minute. It needs a node whose NATS user
	// may purge EVENTS (the admin role, or an embedded server without
	// users); a node of the node role says so in /readyz and leaves it
	// to one that may. Default 24h (only with types set); 0: never, run
	// `esjet archive run` yourself.
	Every Duration `yaml:"every"`
}

// ArchiveRule says when an aggregate of a type is closed for good, and
// what a command to it does once it is archived.
type ArchiveRule struct {
	// ClosedBy are the event types that close an aggregate (e.g.
	// trip_confirmed, trip_cancelled). Required.
	ClosedBy []string `yaml:"closed_by"`
	// After is how long after its last decision a closed aggregate is
	// archived. Default 0: at once (once its commands are settled).
	After Duration `yaml:"after"`
	// OnCommand is what a command to an archived aggregate does:
	// "restore" (decided on the tombstone's state and appended after it;
	// the default) or "refuse" (409 archived).
	OnCommand string `yaml:"on_command"`
}

// ArchiveOnCommand values.
const (
	ArchiveRestore = "restore"
	ArchiveRefuse  = "refuse"
)

// Enabled reports whether any type is archived.
func (a Archive) Enabled() bool { return len(a.Types) > 0 }

// AfterOf is the rule's After as a time.Duration.
func (r ArchiveRule) AfterOf() time.Duration { return r.After.Std() }

func (a Archive) validate(v *validator) {
	for _, typ := range slices.Sorted(maps.Keys(a.Types)) {
		r := a.Types[typ]
		field := "archive.types." + typ
		if !kindPattern.MatchString(typ) {
			v.add(field, typ, "an aggregate type is letters, digits, '_' and '-'")
		}
		if len(r.ClosedBy) == 0 {
			v.add(field+".closed_by", r.ClosedBy, "name the event types that close an aggregate of the type")
		}
		for _, e := range r.ClosedBy {
			if !kindPattern.MatchString(e) {
				v.add(field+".closed_by", e, "an event type is letters, digits, '_' and '-'")
			}
		}
		if r.After < 0 {
			v.add(field+".after", r.After, "use a duration of 0 or more")
		}
		if r.OnCommand != "" {
			v.oneOf(field+".on_command", r.OnCommand, ArchiveRestore, ArchiveRefuse)
		}
	}
	if a.Every < 0 {
		v.add("archive.every", a.Every, "use 0 (never: run esjet archive run yourself) or a duration such as 24h")
	}
	if strings.TrimSpace(a.Dir) != a.Dir {
		v.add("archive.dir", a.Dir, "a path without surrounding spaces")
	}
}

package esjet

import (
	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/aggregate"
)

// UpcastFunc turns an event's JSON data of schema version n into version
// n+1. It must be pure: every read of an old event runs it again.
type UpcastFunc = aggregate.UpcastFunc

// Upcast registers fn, which turns eventType's data of schema version from
// into version from+1: the event type's current version becomes from+1.
// New decisions record that version, and every read of an older event —
// Evolve, history, projections and their rebuilds, the raw API, `esjet
// events`, the console — sees it brought up to the current shape, one step
// after another. Register the steps in order from 1; a version ≤ 0, a step
// registered twice or a gap panics. An event newer than a node knows is
// refused with a [*SchemaError], never guessed (docs/schema-evolution.md).
func Upcast[S any](def *Def[S], eventType string, from int, fn UpcastFunc) *Def[S] {
	return aggregate.Upcast(def, eventType, from, fn)
}

// SchemaError reports a stored event whose schema version is newer than
// this node's definition knows; it wraps [ErrSchemaTooNew].
type SchemaError = aggregate.SchemaError

// ErrSchemaTooNew: an event of the aggregate was written by a newer build
// (its schema version is unknown here). The aggregate's commands fail with it
// (API code schema_too_new) until a node that knows the version serves them;
// other aggregates are served as usual.
var ErrSchemaTooNew = aggregate.ErrSchemaTooNew

// Raw types' schema evolution, in the configuration
// (aggregates.raw.<type>.events): per event type, the steps from version 1.
type (
	RawType   = config.RawType
	RawEvent  = config.RawEvent
	Transform = config.Transform
)

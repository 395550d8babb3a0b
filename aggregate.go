package esjet

import (
	"github.com/esjet/esjet/internal/aggregate"
)

// Event is a stored event as Evolve sees it; Decode unmarshals its data.
type Event = aggregate.Event

// Decision is what a command's Decide returns: the events that happened and
// the commands that must now be carried out, appended as one message.
type Decision = aggregate.Decision

// NewEvent is an event a Decision records.
type NewEvent = aggregate.NewEvent

// NewCommand is a command a Decision issues.
type NewCommand = aggregate.NewCommand

// Command priorities (NewCommand.Priority, Decision.WithPriority): workers
// pull a kind's high commands first, its low ones last, without starving
// any band (docs/flow-control.md). Empty is normal.
const (
	PriorityHigh   = aggregate.PriorityHigh
	PriorityNormal = aggregate.PriorityNormal
	PriorityLow    = aggregate.PriorityLow
)

// Outcome is the payload of the <kind>_done / <kind>_failed a worker reports
// back to the aggregate that issued <kind> with Report set (Decision.Issue).
type Outcome = aggregate.Outcome

// Rejection is a domain "no" (HTTP 422, micro error code 422).
type Rejection = aggregate.Rejection

// Def is an aggregate type with state S being defined.
type Def[S any] = aggregate.Def[S]

// Definition is an aggregate type ready to register with a node.
type Definition = aggregate.Definition

// Define starts an aggregate type named typ with state S; see [On].
// stateSchema versions S's JSON shape in snapshots: bump it when S changes
// incompatibly and old snapshots are ignored (state is rebuilt from events).
// evolve folds one event into the state and must be pure.
func Define[S any](typ string, stateSchema int, evolve func(S, Event) S) *Def[S] {
	return aggregate.Define(typ, stateSchema, evolve)
}

// On registers a command kind whose JSON payload decodes strictly into C.
// decide must be pure; an error it returns is a domain rejection.
//
// A kind DoneKind(k) or FailedKind(k) is the outcome of the commands k the
// aggregate issues with Issue (C must be [Outcome]): clients cannot send
// it, and it reaches decide only from the worker that ran one, for a
// command the aggregate issued and still awaits. Register both for every
// kind you Issue (a command can fail); a kind whose outcome you do not need
// is issued with Fire.
func On[S, C any](def *Def[S], kind string, decide func(S, C) (Decision, error)) *Def[S] {
	return aggregate.On(def, kind, decide)
}

// Emit returns a Decision recording one event; chain Then, Issue, Fire.
func Emit(eventType string, data any) Decision { return aggregate.Emit(eventType, data) }

// Nothing is the Decision that records nothing and issues nothing.
func Nothing() Decision { return Decision{} }

// Reject returns a domain rejection with a machine-readable code.
func Reject(code, format string, args ...any) error { return aggregate.Reject(code, format, args...) }

// DoneKind and FailedKind name the result commands of a command kind.
func DoneKind(kind string) string   { return aggregate.DoneKind(kind) }
func FailedKind(kind string) string { return aggregate.FailedKind(kind) }

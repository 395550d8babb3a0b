package aggregate

import (
	"time"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Event is a stored event as Evolve sees it: the log's own event
// (wire.Event), after upcasting, with its Decode method.
type Event = wire.Event

// Decision is what Decide returns: the events that happened and the commands
// that must now be carried out. A decision with no events and no commands
// means "nothing to do" and appends nothing. A decision that issues commands
// must record at least one event.
type Decision struct {
	Events   []NewEvent
	Commands []NewCommand
}

// NewEvent is an event Decide records. Data is marshalled as JSON.
type NewEvent struct {
	Type   string
	Schema int // 0 means 1
	Data   any
}

// NewCommand is a command Decide issues.
type NewCommand struct {
	Kind    string
	Payload any
	// Report asks for the outcome (<kind>_done or <kind>_failed) to be sent
	// back to this aggregate as a command.
	Report bool
	// DeliverAfter delays the command; zero means now.
	DeliverAfter time.Time
	// Priority is the command's band among its kind's: [PriorityHigh],
	// [PriorityLow], or empty (normal). Workers pull higher bands first
	// without starving lower ones (docs/flow-control.md).
	Priority string
	// Schema is the version of Payload's shape; 0 means 1. Workers that
	// understand only older versions of the kind (workers.<kind>.schema)
	// leave the command for one that understands it, counting no attempt
	// (docs/schema-evolution.md).
	Schema int
}

// Command priorities ([NewCommand].Priority); "normal" is accepted for
// empty.
const (
	PriorityHigh   = streams.PriorityHigh
	PriorityNormal = streams.PriorityNormal
	PriorityLow    = streams.PriorityLow
)

// Emit returns a decision recording one event.
func Emit(eventType string, data any) Decision {
	return Decision{Events: []NewEvent{{Type: eventType, Data: data}}}
}

// Then appends an event.
func (d Decision) Then(eventType string, data any) Decision {
	d.Events = append(d.Events, NewEvent{Type: eventType, Data: data})
	return d
}

// Issue appends a command whose outcome is reported back to the aggregate.
func (d Decision) Issue(kind string, payload any) Decision {
	d.Commands = append(d.Commands, NewCommand{Kind: kind, Payload: payload, Report: true})
	return d
}

// IssueAfter appends a delayed command whose outcome is reported back.
func (d Decision) IssueAfter(at time.Time, kind string, payload any) Decision {
	d.Commands = append(d.Commands, NewCommand{Kind: kind, Payload: payload, Report: true, DeliverAfter: at})
	return d
}

// WithPriority sets the priority of the command appended last (see
// [NewCommand].Priority); without a command it changes nothing.
func (d Decision) WithPriority(p string) Decision {
	if n := len(d.Commands); n > 0 {
		d.Commands = append(d.Commands[:n-1:n-1], d.Commands[n-1])
		d.Commands[n-1].Priority = p
	}
	return d
}

// WithSchema sets the schema version of the command appended last's
// payload (see [NewCommand].Schema); without a command it changes nothing.
func (d Decision) WithSchema(version int) Decision {
	if n := len(d.Commands); n > 0 {
		d.Commands = append(d.Commands[:n-1:n-1], d.Commands[n-1])
		d.Commands[n-1].Schema = version
	}
	return d
}

// Fire appends a command whose outcome is not reported back.
func (d Decision) Fire(kind string, payload any) Decision {
	d.Commands = append(d.Commands, NewCommand{Kind: kind, Payload: payload})
	return d
}

// Result command kinds: a worker reports a command's outcome to the issuing
// aggregate as one of these. The wire contract (package wire) owns them.
func DoneKind(kind string) string   { return wire.DoneKind(kind) }
func FailedKind(kind string) string { return wire.FailedKind(kind) }

// Outcome is the payload of a <kind>_done or <kind>_failed command, as
// package wire defines it.
type Outcome = wire.Outcome

package aggregate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"

	"github.com/esjet/esjet/internal/wire"
)

// Definition is an aggregate type with its state type erased, as the
// repository and the APIs use it. Build one with [Define] and [On].
type Definition struct {
	typ      string
	schema   int
	newState func() any
	evolve   func(state any, e Event) any
	encode   func(state any) (json.RawMessage, error)
	decodeSt func(json.RawMessage) (any, error)
	commands map[string]commandDef
	events   map[string]*upcasts // event types with upcasters (schema.go)
	archived ArchivedCommands    // what a command to an archived aggregate does
}

// ArchivedCommands is what a command to an archived aggregate of a type
// does (docs/archiving.md).
type ArchivedCommands int

const (
	// ArchivedRestore decides it on the state the tombstone carries and
	// appends after the tombstone: the aggregate lives on, its archived
	// history still read from the archive. The default.
	ArchivedRestore ArchivedCommands = iota
	// ArchivedRefuse answers [ErrArchived] (409 archived) and writes
	// nothing.
	ArchivedRefuse
)

// SetArchived sets what a command to an archived aggregate of the type
// does; a node sets it from the configuration (archive.types.<type>).
func (d *Definition) SetArchived(a ArchivedCommands) { d.archived = a }

// Archived is what a command to an archived aggregate of the type does.
func (d *Definition) Archived() ArchivedCommands { return d.archived }

type commandDef struct {
	decode func(json.RawMessage) (any, error)
	decide func(state, cmd any) (Decision, error)
	// outcomeOf is the issued command kind when this kind is its outcome
	// (<kind>_done or <kind>_failed); "" for a client command.
	outcomeOf string
	result    string // wire.OutcomeDone or wire.OutcomeFailed for an outcome
}

// Def is the typed handle used while defining an aggregate type with state S.
type Def[S any] struct{ d *Definition }

// Define starts an aggregate type named typ with state S. stateSchema is the
// version of S's JSON shape in snapshots: bump it when S changes
// incompatibly, and old snapshots are ignored (the state is rebuilt from
// events). evolve folds one event into the state; it must be pure.
func Define[S any](typ string, stateSchema int, evolve func(S, Event) S) *Def[S] {
	if err := wire.ValidateToken("aggregate type", typ); err != nil {
		panic(fmt.Sprintf("aggregate.Define: %v", err))
	}
	if stateSchema < 1 {
		panic("aggregate.Define: stateSchema must be ≥ 1")
	}
	return &Def[S]{d: &Definition{
		typ:      typ,
		schema:   stateSchema,
		newState: func() any { var s S; return s },
		evolve:   func(state any, e Event) any { return evolve(state.(S), e) },
		encode: func(state any) (json.RawMessage, error) {
			return json.Marshal(state.(S))
		},
		decodeSt: func(raw json.RawMessage) (any, error) {
			var s S
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, err
			}
			return s, nil
		},
		commands: map[string]commandDef{},
	}}
}

// On registers the command kind on the aggregate type: its payload decodes
// strictly (unknown fields are an error) into C, and decide turns the state
// and the command into a decision. decide must be pure; an error it returns
// is a domain rejection (use [Reject] for a code).
//
// A kind of the form [DoneKind](k) or [FailedKind](k) is the outcome of a
// command k the aggregate issues with Report: C must be [Outcome]. Clients
// cannot send it ([ErrOutcomeNotSendable]); the worker that ran the command
// reports it through [Repository.HandleOutcome], and the repository lets it
// reach decide only for a command this aggregate issued that is still
// outstanding, so decide need not defend against forged outcomes.
func On[S, C any](def *Def[S], kind string, decide func(S, C) (Decision, error)) *Def[S] {
	if err := wire.ValidateToken("command kind", kind); err != nil {
		panic(fmt.Sprintf("aggregate.On(%s): %v", def.d.typ, err))
	}
	of, result, isOutcome := wire.ParseOutcomeKind(kind)
	if isOutcome && reflect.TypeFor[C]() != reflect.TypeFor[Outcome]() {
		panic(fmt.Sprintf("aggregate.On(%s): command kind %q is the form of the outcome of %q, whose payload is an Outcome, not %v; give a client command another name",
			def.d.typ, kind, of, reflect.TypeFor[C]()))
	}
	if _, dup := def.d.commands[kind]; dup {
		panic(fmt.Sprintf("aggregate.On(%s): command %q registered twice", def.d.typ, kind))
	}
	def.d.commands[kind] = commandDef{
		decode: func(raw json.RawMessage) (any, error) {
			var c C
			if len(bytes.TrimSpace(raw)) == 0 {
				raw = json.RawMessage("{}")
			}
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&c); err != nil {
				return nil, err
			}
			if dec.More() {
				return nil, errors.New("trailing data after the JSON value")
			}
			return c, nil
		},
		decide: func(state, cmd any) (Decision, error) { return decide(state.(S), cmd.(C)) },
	}
	if isOutcome {
		cd := def.d.commands[kind]
		cd.outcomeOf, cd.result = of, result
		def.d.commands[kind] = cd
	}
	return def
}

// Definition returns the type-erased definition.
func (d *Def[S]) Definition() *Definition { return d.d }

// Type is the aggregate type name.
func (d *Definition) Type() string { return d.typ }

// StateSchema is the version of the state's snapshot shape.
func (d *Definition) StateSchema() int { return d.schema }

// Commands lists the command kinds clients may send, sorted: outcomes are
// not among them (see [Definition.Outcomes]).
func (d *Definition) Commands() []string {
	return d.kinds(func(c commandDef) bool { return c.outcomeOf == "" })
}

// Outcomes lists the outcome kinds the type handles (<kind>_done,
// <kind>_failed), sorted. Only a worker reports them, through
// [Repository.HandleOutcome].
func (d *Definition) Outcomes() []string {
	return d.kinds(func(c commandDef) bool { return c.outcomeOf != "" })
}

// hears reports whether the type registers an outcome of command kind
// (<kind>_done or <kind>_failed): only then can a report of it be
// admitted, so only then is the command awaited.
func (d *Definition) hears(kind string) bool {
	_, done := d.commands[DoneKind(kind)]
	_, failed := d.commands[FailedKind(kind)]
	return done || failed
}

func (d *Definition) kinds(keep func(commandDef) bool) []string {
	out := []string{}
	for k, c := range d.commands {
		if keep(c) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Replay folds events into a fresh state: what a cold load does, without
// the store. For tests and tools.
func (d *Definition) Replay(events []Event) any {
	s := d.newState()
	for _, e := range events {
		s = d.evolve(s, e)
	}
	return s
}

// copyState returns a deep copy of state through its JSON form, so a caller
// can read it while the repository keeps evolving the original.
func (d *Definition) copyState(state any) (any, error) {
	raw, err := d.encode(state)
	if err != nil {
		return nil, err
	}
	return d.decodeSt(raw)
}

// Decide decodes the command payload and runs the kind's decide function
// against state. It returns [ErrUnknownCommand], [ErrBadCommand], a
// rejection wrapping [ErrRejected], or [ErrInvalidDecision] if decide
// panicked.
func (d *Definition) Decide(state any, kind string, payload json.RawMessage) (dec Decision, err error) {
	defer func() {
		if p := recover(); p != nil {
			dec, err = Decision{}, fmt.Errorf("%w: %s.%s panicked: %v", ErrInvalidDecision, d.typ, kind, p)
		}
	}()
	c, ok := d.commands[kind]
	if !ok {
		return Decision{}, fmt.Errorf("%w: %s has no command %q (it has: %v)", ErrUnknownCommand, d.typ, kind, d.Commands())
	}
	cmd, err := c.decode(payload)
	if err != nil {
		return Decision{}, fmt.Errorf("%w: %s.%s: %w", ErrBadCommand, d.typ, kind, err)
	}
	dec, err = c.decide(state, cmd)
	if err != nil {
		if errors.Is(err, ErrRejected) {
			return Decision{}, err
		}
		return Decision{}, &Rejection{Code: "rejected", Message: err.Error()}
	}
	return dec, nil
}

// Registry is the set of aggregate types a node serves.
type Registry struct{ defs map[string]*Definition }

// NewRegistry builds a registry; a type registered twice is an error.
func NewRegistry(defs ...*Definition) (*Registry, error) {
	r := &Registry{defs: map[string]*Definition{}}
	for _, d := range defs {
		if _, dup := r.defs[d.typ]; dup {
			return nil, fmt.Errorf("aggregate type %q registered twice", d.typ)
		}
		r.defs[d.typ] = d
	}
	return r, nil
}

// Get returns the definition of typ or [ErrUnknownType].
func (r *Registry) Get(typ string) (*Definition, error) {
	if d, ok := r.defs[typ]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("%w %q (registered: %v)", ErrUnknownType, typ, r.Types())
}

// Types lists the registered type names, sorted.
func (r *Registry) Types() []string {
	out := make([]string, 0, len(r.defs))
	for k := range r.defs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

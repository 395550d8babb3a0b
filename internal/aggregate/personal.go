package aggregate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/esjet/esjet/internal/shred"
	"github.com/esjet/esjet/internal/streams"
)

// Personal data (docs/personal-data.md): the repository seals what is
// personal in a decision before it reaches the log, and in a snapshot
// before it reaches the snapshots bucket; the log's reader opens both. The
// plaintext stays in memory only (the cache, the record folded after an
// append).

// specs are the personal fields of each event and command of dec, from the
// Go values' `esjet:"personal,…"` tags.
func specsOf(dec Decision) (events, commands []shred.Spec, err error) {
	for _, ne := range dec.Events {
		s, err := shred.SpecOf(ne.Data)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: event %s: %w", ErrInvalidDecision, ne.Type, err)
		}
		events = append(events, s)
	}
	for _, nc := range dec.Commands {
		s, err := shred.SpecOf(nc.Payload)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: command %s: %w", ErrInvalidDecision, nc.Kind, err)
		}
		commands = append(commands, s)
	}
	return events, commands, nil
}

// plainKinds drops the specs of the commands whose kinds stay in
// plaintext (Config.PlainKinds).
func (r *Repository) plainKinds(d streams.Decision, commands []shred.Spec) []shred.Spec {
	for i, c := range d.Commands {
		if i < len(commands) && slices.Contains(r.cfg.PlainKinds, c.Kind) {
			commands[i] = shred.Spec{}
		}
	}
	return commands
}

// rawSpecs are the personal fields of a raw decision's events and commands,
// from the configuration (Config.Personal).
func (r *Repository) rawSpecs(d streams.Decision) (events, commands []shred.Spec) {
	for _, e := range d.Events {
		events = append(events, r.cfg.Personal.Lookup(d.AggregateType, e.Type))
	}
	for _, c := range d.Commands {
		commands = append(commands, r.cfg.Personal.Lookup(d.AggregateType, c.Kind))
	}
	return events, commands
}

// oldShapes refuses a raw event written at a schema older than the one its
// personal fields are named for: sealing goes by name, so a field an older
// shape names otherwise (renamed since, as the upcasters say) would be
// stored in plaintext, and stay readable after its subject is forgotten.
func oldShapes(d streams.Decision, events []shred.Spec) error {
	for i, e := range d.Events {
		if s := events[i]; !s.Empty() && max(e.Schema, 1) < s.Schema {
			return fmt.Errorf("%w: event %d (%s) of %s/%s is at schema %d, but its personal fields are named as of schema %d, the current one (an older shape's could be stored in plaintext); write it at schema %d; nothing was written",
				streams.ErrInvalidDecision, i, e.Type, d.AggregateType, d.AggregateID, max(e.Schema, 1), s.Schema, s.Schema)
		}
	}
	return nil
}

// seal returns a copy of d with the personal fields of its events and
// commands sealed; d itself keeps the plaintext.
func (r *Repository) seal(ctx context.Context, d streams.Decision, events, commands []shred.Spec) (streams.Decision, error) {
	if err := reserved(d); err != nil {
		return d, err
	}
	commands = r.plainKinds(d, commands)
	if !anyPersonal(events) && !anyPersonal(commands) {
		return d, nil
	}
	if r.cfg.Sealer == nil {
		return d, fmt.Errorf("%w: %s has personal fields but the repository has no keyring to seal them", ErrInvalidDecision, d.AggregateType)
	}
	out := d
	if d.RequestDigest != "" {
		// The request held personal data too, most likely.
		keyed, err := r.keyDigest(ctx, d.RequestDigest)
		if err != nil {
			return d, err
		}
		out.RequestDigest = keyed
	}
	out.Events = append([]streams.Event(nil), d.Events...)
	out.Commands = append([]streams.Command(nil), d.Commands...)
	for i := range out.Events {
		data, err := r.cfg.Sealer.SealJSON(ctx, out.Events[i].Data, events[i])
		if err != nil {
			return d, sealFailed(err, fmt.Sprintf("seal event %d (%s) of %s/%s", i, out.Events[i].Type, d.AggregateType, d.AggregateID))
		}
		out.Events[i].Data = data
	}
	for i := range out.Commands {
		p, err := r.cfg.Sealer.SealJSON(ctx, out.Commands[i].Payload, commands[i])
		if err != nil {
			return d, sealFailed(err, fmt.Sprintf("seal command %d (%s) of %s/%s", i, out.Commands[i].Kind, d.AggregateType, d.AggregateID))
		}
		out.Commands[i].Payload = p
	}
	return out, nil
}

// sealFailed says what could not be sealed: a personal field without its
// data subject is the writer's input (400 invalid_events, not a 500 logged
// as the node's fault); anything else is the keyring's.
func sealFailed(err error, what string) error {
	if errors.Is(err, shred.ErrNoSubject) {
		return fmt.Errorf("%w: %s: %w; nothing was written", streams.ErrInvalidDecision, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// sealAll seals each of sds, the decisions of decs at the indexes at.
func (r *Repository) sealAll(ctx context.Context, sds []streams.Decision, decs []Decision, at []int) ([]streams.Decision, error) {
	out := make([]streams.Decision, len(sds))
	for n, sd := range sds {
		events, commands, err := specsOf(decs[at[n]])
		if err != nil {
			return nil, err
		}
		if out[n], err = r.seal(ctx, sd, events, commands); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// reserved refuses a decision whose data or payloads hold a sealed value
// before the node sealed anything ([shred.CheckReserved]): a raw append's
// or a command's input may not plant one, which no read of the record
// could open.
func reserved(d streams.Decision) error {
	for i, e := range d.Events {
		if err := shred.CheckReserved(e.Data); err != nil {
			return fmt.Errorf("%w: event %d (%s) of %s/%s: %w; nothing was written", streams.ErrInvalidDecision, i, e.Type, d.AggregateType, d.AggregateID, err)
		}
	}
	for i, c := range d.Commands {
		if err := shred.CheckReserved(c.Payload); err != nil {
			return fmt.Errorf("%w: command %d (%s) of %s/%s: %w; nothing was written", streams.ErrInvalidDecision, i, c.Kind, d.AggregateType, d.AggregateID, err)
		}
	}
	return nil
}

func anyPersonal(specs []shred.Spec) bool {
	for _, s := range specs {
		if !s.Empty() {
			return true
		}
	}
	return false
}

// plain puts the plaintext of d back into rec, the record its sealed copy
// was appended as, so that what is folded and cached reads as decided.
func plain(rec streams.Record, d streams.Decision) streams.Record {
	if rec.ID != d.ID || len(rec.Events) != len(d.Events) || len(rec.Commands) != len(d.Commands) {
		return rec
	}
	rec.Events = append([]streams.Event(nil), rec.Events...)
	for i := range rec.Events {
		rec.Events[i].Data = d.Events[i].Data
	}
	rec.Commands = append([]streams.Command(nil), rec.Commands...)
	for i := range rec.Commands {
		rec.Commands[i].Payload = d.Commands[i].Payload
	}
	return rec
}

// sealState seals the personal fields of a snapshot's state, as the state
// type's tags mark them.
func (r *Repository) sealState(ctx context.Context, def *Definition, state []byte) ([]byte, error) {
	spec, err := shred.SpecOf(def.newState())
	if err != nil || spec.Empty() {
		return state, err
	}
	if r.cfg.Sealer == nil {
		return nil, fmt.Errorf("state of %s has personal fields but the repository has no keyring to seal them", def.typ)
	}
	return r.cfg.Sealer.SealJSON(ctx, state, spec)
}

// openState opens a snapshot's state: personal fields of a forgotten
// subject come back null, as the log's events do.
func (r *Repository) openState(ctx context.Context, state []byte) ([]byte, error) {
	if !shred.IsSealed(state) {
		return state, nil
	}
	if r.cfg.Sealer == nil {
		return nil, fmt.Errorf("snapshot holds sealed personal data but the repository has no keyring")
	}
	out, _, err := r.cfg.Sealer.OpenJSON(ctx, state)
	return out, err
}

// Forgotten drops every cached state: a subject was forgotten and the
// cache may hold its personal data in plaintext. The next command on each
// aggregate loads it again (snapshot, then log), with the fields erased.
func (r *Repository) Forgotten() { r.cache.clear() }

// clear empties the cache.
func (c *lru) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order.Init()
	clear(c.items)
	c.bytes = 0
	c.gen++
}

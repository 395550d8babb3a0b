package aggregate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// foldTombstone takes e's state from a tombstone: the aggregate's
// decisions before it are in the archive, and its state as of the last
// one is in the tombstone. Every command it issued was settled before it
// was archived, so nothing is outstanding.
func (r *Repository) foldTombstone(ctx context.Context, def *Definition, e *entry, rec streams.Record) error {
	t, _, err := wire.TombstoneOf(rec)
	if err != nil {
		return err
	}
	if len(t.State) == 0 {
		// Archived by a build that did not know the type's Definition:
		// folding on from the zero state would lose it.
		return fmt.Errorf("%w: %s/%s: the tombstone at seq %d carries no state (archived as a raw type); its history is in the archive %s",
			ErrInvalidDecision, rec.AggregateType, rec.AggregateID, rec.Seq, t.Archive)
	}
	if t.StateSchema != 0 && t.StateSchema != def.schema {
		return fmt.Errorf("%w: %s/%s: the tombstone at seq %d holds state schema %d, this build's is %d; restore the aggregate from the archive %s",
			ErrSchemaTooNew, rec.AggregateType, rec.AggregateID, rec.Seq, t.StateSchema, def.schema, t.Archive)
	}
	opened, err := r.openState(ctx, t.State)
	if err != nil {
		return fmt.Errorf("%s/%s: tombstone at seq %d: %w", rec.AggregateType, rec.AggregateID, rec.Seq, err)
	}
	state, err := def.decodeSt(opened)
	if err != nil {
		return fmt.Errorf("%s/%s: tombstone at seq %d: state: %w", rec.AggregateType, rec.AggregateID, rec.Seq, err)
	}
	e.state = state
	e.stateBytes = len(t.State)
	e.pos = rec.Position()
	e.archivedSeq = rec.Seq
	if e.snapSeq == 0 {
		e.snapSeq = rec.Seq
	}
	clear(e.outstanding)
	return nil
}

// get returns the cached entry or loads it cold: snapshot + tail. loaded
// says it was just read from the log, so its tail need not be checked
// again before answering.
func (r *Repository) get(ctx context.Context, def *Definition, a wire.AggregateRef) (_ *entry, loaded bool, _ error) {
	key := a.String()
	gen := r.cache.generation()
	if e, ok := r.cache.get(key); ok {
		r.stats.cacheHits.Add(1)
		return e, false, nil
	}
	r.stats.coldLoads.Add(1)
	e, ok := (*entry)(nil), false
	if r.cfg.SnapshotEvery > 0 {
		e, ok = r.readSnapshot(ctx, def, a.Type(), a.ID())
	}
	if !ok {
		e = &entry{state: def.newState(), recent: map[string]recentDecision{}, outstanding: map[string]string{}}
	}
	if err := r.refresh(ctx, def, a, e, 0); err != nil {
		return nil, false, err
	}
	if r.snapshotDue(e) && r.cache.generation() == gen { // see settle
		r.writeSnapshot(ctx, def, a.Type(), a.ID(), e)
	}
	if e.pos.Seq > 0 {
		r.cache.put(key, e, gen)
	}
	return e, true, nil
}

// current returns a's entry as the log holds it now: loaded cold, or the
// cached one with the tail read past it (another node may have written).
// The caller holds a's lock.
func (r *Repository) current(ctx context.Context, def *Definition, a wire.AggregateRef) (*entry, error) {
	e, loaded, err := r.get(ctx, def, a)
	if err != nil || loaded {
		return e, err
	}
	if err := r.refresh(ctx, def, a, e, 0); err != nil {
		r.cache.remove(a.String())
		return nil, err
	}
	return e, nil
}

// refresh folds the records stored after e's position into e — only the
// tail. atLeast, when known (a conflict names the actual position), waits
// for a lagging replica to have it.
func (r *Repository) refresh(ctx context.Context, def *Definition, a wire.AggregateRef, e *entry, atLeast uint64) error {
	var opts []streams.LoadOption
	if atLeast > e.pos.Seq {
		opts = append(opts, streams.AtLeast(atLeast))
	}
	r.stats.tailReads.Add(1)
	tail, err := r.log.LoadTail(ctx, a, e.pos, opts...)
	if err != nil {
		return err
	}
	r.stats.recordsRead.Add(int64(len(tail.Records)))
	for _, rec := range tail.Records {
		fold := r.fold
		if wire.IsTombstone(rec) {
			fold = func(def *Definition, e *entry, rec streams.Record) error { return r.foldTombstone(ctx, def, e, rec) }
		}
		if err := fold(def, e, rec); err != nil {
			return err
		}
	}
	// A message esjet did not write (skipped and logged by the log) may be
	// the subject's last: the next append must expect its sequence, or it
	// conflicts for ever.
	e.pos.Seq = max(e.pos.Seq, tail.LastSeq)
	return nil
}

// fold applies one stored decision to e, all or nothing: if Evolve panics
// the entry is left as it was and the panic is returned as an error (the
// caller evicts the entry). Replay only evolves: the commands in rec are not
// dispatched here (the relay reads them from the log).
func (r *Repository) fold(def *Definition, e *entry, rec streams.Record) (err error) {
	state := e.state
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s.Evolve panicked on %s/%s seq %d: %v", ErrInvalidDecision, def.typ, rec.AggregateType, rec.AggregateID, rec.Seq, p)
		}
	}()
	grew := 0
	for _, ev := range rec.Events {
		state = def.evolve(state, ev)
		grew += len(ev.Data)
	}
	e.stateBytes += grew
	e.state = state
	if e.snapSeq == 0 {
		e.snapSeq = rec.Seq
	}
	e.pos = rec.Position()
	e.sinceSnapshot += len(rec.Events)
	e.remember(rec, r.horizon())
	r.track(def, e, rec)
	return nil
}

// ArchiveState is what the archive needs of aggregate typ/id standing at
// at: its state as a tombstone carries it (sealed as a snapshot is, when
// it has personal fields) with its schema, and how many reported commands
// still await their outcome. It returns an error wrapping [ErrConflict]
// when the aggregate is not at at (a decision came since): the archive
// of it is then abandoned.
func (r *Repository) ArchiveState(ctx context.Context, typ, id string, at streams.Position) (state json.RawMessage, schema, outstanding int, err error) {
	def, a, err := r.resolve(typ, id)
	if err != nil {
		return nil, 0, 0, err
	}
	mu := r.locks.lock(a.String())
	mu.Lock()
	defer mu.Unlock()
	e, err := r.current(ctx, def, a)
	if err != nil {
		return nil, 0, 0, err
	}
	if e.pos != at {
		return nil, 0, 0, fmt.Errorf("%w: %s/%s stands at seq %d version %d, not %d/%d", ErrConflict, typ, id, e.pos.Seq, e.pos.Version, at.Seq, at.Version)
	}
	raw, err := def.encode(e.state)
	if err == nil {
		raw, err = r.sealState(ctx, def, raw)
	}
	return raw, def.schema, len(e.outstanding), err
}

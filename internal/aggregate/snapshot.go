package aggregate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
)

// snapshotVersion is the version of the snapshot record itself (not of the
// state inside it, which is the definition's StateSchema). Version 2 added
// the outstanding commands; a version 1 snapshot lacks them, so it is
// treated as missing and the aggregate is replayed from its events.
const snapshotVersion = 2

// snapshot is what the snapshots bucket holds under <type>.<id>.
type snapshot struct {
	V int `json:"v"`
	// RecentSince, when set, says Recent holds only the decisions from then
	// on (the newest maxRecentInSnapshot); older keys are found in the log.
	RecentSince time.Time                 `json:"recent_since,omitzero"`
	StateSchema int                       `json:"state_schema"`
	Seq         uint64                    `json:"seq"`
	Version     uint64                    `json:"version"`
	State       json.RawMessage           `json:"state"`
	Recent      map[string]recentDecision `json:"recent,omitempty"`
	// Outstanding are the reported commands awaiting their outcome:
	// command id → kind.
	Outstanding map[string]string `json:"outstanding,omitempty"`
	Taken       time.Time         `json:"taken"`
}

func snapshotKey(typ, id string) string { return typ + "." + id }

// DropSnapshot deletes aggregate typ/id's snapshot (the bucket keeps one
// revision per key, so the delete marker replaces it) and forgets the
// aggregate in this repository's cache. The archive calls it once
// the aggregate's tombstone is in the log: the tombstone carries the
// state, and a snapshot of the archived history is a second, older copy
// of it (with the idempotency keys of archived decisions, which must not
// answer any more). An aggregate without a snapshot is left as it is (a
// delete would leave a marker).
func (r *Repository) DropSnapshot(ctx context.Context, typ, id string) error {
	r.cache.remove(typ + "/" + id)
	key := snapshotKey(typ, id)
	_, err := r.snaps.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil
	}
	if err == nil {
		err = r.snaps.Delete(ctx, key)
	}
	if err != nil {
		return fmt.Errorf("drop the snapshot of %s/%s: %w", typ, id, err)
	}
	return nil
}

// maxRecentInSnapshot bounds the idempotency keys a snapshot carries, so a
// busy aggregate's snapshot stays well under the max message size.
const maxRecentInSnapshot = 2000

// readSnapshot returns the aggregate's snapshot as an entry, or ok=false
// when there is none usable: missing, of another state schema (the state is
// then rebuilt from events), or unreadable.
func (r *Repository) readSnapshot(ctx context.Context, def *Definition, typ, id string) (*entry, bool) {
	kv, err := r.snaps.Get(ctx, snapshotKey(typ, id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, false
	}
	if err != nil {
		r.logger.Warn("snapshot unreadable; replaying from events", "aggregate_type", typ, "aggregate_id", id, "error", err)
		return nil, false
	}
	var s snapshot
	if err := json.Unmarshal(kv.Value(), &s); err == nil && s.V < snapshotVersion {
		r.logger.Info("snapshot of an older format (without outstanding commands); replaying from events",
			"aggregate_type", typ, "aggregate_id", id, "snapshot_version", s.V, "version", snapshotVersion)
		return nil, false
	} else if err != nil || s.V != snapshotVersion {
		r.logger.Warn("snapshot of an unknown format; replaying from events", "aggregate_type", typ, "aggregate_id", id, "error", err)
		return nil, false
	}
	if s.StateSchema != def.schema {
		r.logger.Info("snapshot of another state schema; replaying from events",
			"aggregate_type", typ, "aggregate_id", id, "snapshot_schema", s.StateSchema, "schema", def.schema)
		return nil, false
	}
	opened, err := r.openState(ctx, s.State)
	if err != nil {
		r.logger.Warn("snapshot's personal data unreadable; replaying from events", "aggregate_type", typ, "aggregate_id", id, "error", err)
		return nil, false
	}
	state, err := def.decodeSt(opened)
	if err != nil {
		r.logger.Warn("snapshot state does not decode; replaying from events", "aggregate_type", typ, "aggregate_id", id, "error", err)
		return nil, false
	}
	if s.Recent == nil {
		s.Recent = map[string]recentDecision{}
	}
	if s.Outstanding == nil {
		s.Outstanding = map[string]string{}
	}
	for id, kind := range s.Outstanding {
		if !def.hears(kind) { // written before such commands were left out
			delete(s.Outstanding, id)
		}
	}
	r.stats.snapshotHits.Add(1)
	e := &entry{state: state, pos: streams.Position{Seq: s.Seq, Version: s.Version}, recent: s.Recent, recentSince: s.RecentSince,
		outstanding: s.Outstanding, snapSeq: s.Seq, stateBytes: len(s.State)}
	for _, rd := range e.recent {
		if e.oldest.IsZero() || rd.At.Before(e.oldest) {
			e.oldest = rd.At
		}
	}
	return e, true
}

// snapshotDue says whether e, just folded, should be snapshotted: after
// SnapshotEvery events, or when its events since the last snapshot span
// more than SnapshotSpan messages of the log. A cold load reads the log
// from the snapshot on, walking every file store block in between (the
// server's per-subject index knows an aggregate's first and last block,
// not the ones between), so the span, not the event count, is what a
// cold load costs when an aggregate's events lie far apart.
func (r *Repository) snapshotDue(e *entry) bool {
	if r.cfg.SnapshotEvery <= 0 || e.sinceSnapshot == 0 {
		return false
	}
	if e.sinceSnapshot >= r.cfg.SnapshotEvery {
		return true
	}
	return r.cfg.SnapshotSpan > 0 && e.snapSeq > 0 && e.pos.Seq-e.snapSeq > uint64(r.cfg.SnapshotSpan)
}

// writeSnapshot stores e. A failure is logged, not returned: a snapshot only
// saves time, the log stays the truth.
func (r *Repository) writeSnapshot(ctx context.Context, def *Definition, typ, id string, e *entry) {
	state, err := def.encode(e.state)
	if err == nil {
		state, err = r.sealState(ctx, def, state)
	}
	if err == nil {
		var data []byte
		recent, since := newestRecent(e)
		data, err = json.Marshal(snapshot{
			V: snapshotVersion, StateSchema: def.schema, Seq: e.pos.Seq, Version: e.pos.Version,
			State: state, Recent: recent, RecentSince: since, Outstanding: e.outstanding, Taken: r.cfg.Now().UTC(),
		})
		if err == nil {
			_, err = r.snaps.Put(ctx, snapshotKey(typ, id), data)
		}
	}
	if err != nil {
		r.logger.Warn("snapshot not written", "aggregate_type", typ, "aggregate_id", id, "error", err)
		return
	}
	e.sinceSnapshot, e.snapSeq, e.stateBytes = 0, e.pos.Seq, len(state)
	r.stats.snapshotsWritten.Add(1)
}

// newestRecent returns the entry's recent decisions for a snapshot: all of
// them, or the newest maxRecentInSnapshot and the time from which that part
// is complete.
func newestRecent(e *entry) (map[string]recentDecision, time.Time) {
	if len(e.recent) <= maxRecentInSnapshot {
		return e.recent, e.recentSince
	}
	ids := make([]string, 0, len(e.recent))
	for id := range e.recent {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return e.recent[b].At.Compare(e.recent[a].At) })
	out := make(map[string]recentDecision, maxRecentInSnapshot)
	for _, id := range ids[:maxRecentInSnapshot] {
		out[id] = e.recent[id]
	}
	since := e.recent[ids[maxRecentInSnapshot-1]].At
	if e.recentSince.After(since) {
		since = e.recentSince
	}
	return out, since
}

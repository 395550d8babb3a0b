package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Views answers queries on a namespace's views, on any node (it needs no
// definitions: the control bucket says what exists). Safe for concurrent use.
type Views struct {
	js       jetstream.JetStream
	ns       string
	names    streams.Names
	leaseTTL time.Duration
	snaps    snapshots
}

// NewViews returns the query side of namespace ns's views. leaseTTL is the
// runners' (0: 5s): an owner silent for longer counts as stopped.
func NewViews(js jetstream.JetStream, ns string, leaseTTL time.Duration) *Views {
	if leaseTTL == 0 {
		leaseTTL = 5 * time.Second
	}
	return &Views{js: js, ns: ns, names: streams.NamesFor(ns), leaseTTL: leaseTTL}
}

// Doc is one document of a view.
type Doc struct {
	View       string          `json:"view"`
	Key        string          `json:"key"`
	Value      json.RawMessage `json:"value"`
	Revision   uint64          `json:"revision"`
	Generation int             `json:"generation"`
	// Position is where the whole view stood when the document was read:
	// every event up to it is in the view (the lowest partition's
	// checkpoint, just before its first parked event; 0: no claim).
	Position uint64 `json:"position,omitempty"`
}

// Wait makes a read wait until the view has passed a position (a
// command's result position): read your own writes.
type Wait struct {
	After uint64
	// For bounds the wait; 0 means 5s.
	For time.Duration
}

// ListQuery selects a page of a view's documents in key order.
type ListQuery struct {
	Prefix string
	Cursor string // the last key of the previous page
	// Limit is 1 to 1000; 0 means 100.
	Limit int
}

// Page is one page of documents; Cursor is set when more follow.
type Page struct {
	View       string `json:"view"`
	Generation int    `json:"generation"`
	Docs       []Doc  `json:"docs"`
	Cursor     string `json:"cursor,omitempty"`
}

func (v *Views) control(ctx context.Context, name string) (controlStore, Control, error) {
	if err := ValidateName(name); err != nil {
		return controlStore{}, Control{}, err
	}
	kv, err := v.js.KeyValue(ctx, wire.ProjectionsBucket(v.ns))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return controlStore{}, Control{}, fmt.Errorf("%w: %s (no projection has run in namespace %s)", ErrUnknown, name, v.ns)
	}
	if err != nil {
		return controlStore{}, Control{}, err
	}
	cs := controlStore{kv: kv}
	ctl, rev, err := cs.control(ctx, name)
	if err == nil && rev == 0 {
		err = fmt.Errorf("%w: %s (no node has run it; `esjet projections ls` lists the projections)", ErrUnknown, name)
	}
	return cs, ctl, err
}

// Get returns the document under key of the active generation of view
// name, after waiting (bounded) for w.After when set: it answers once
// every partition of the view holds every event up to w.After (with
// partitions that share documents, any of them may hold one the document
// depends on). The wait ends at once with [ErrParked] when an event up to
// w.After is parked (or a single projection stopped before it), with
// [ErrStopped] when the view is paused or a partition behind has no owner,
// and with [ErrNotYet] when the bound passes. A view kept in the user's
// own store answers [ErrOwnStore].
//
// The document's Position is true: every event up to it is in the view
// (the lowest partition's checkpoint, just before its first parked event),
// read with the document as one copy of the bucket held them (on R3 a
// replica a moment behind answers with its older checkpoints too), and
// checked unchanged in owner after it.
func (v *Views) Get(ctx context.Context, name, key string, w Wait) (Doc, error) {
	if err := ValidateKey(key); err != nil {
		return Doc{}, err
	}
	cs, ctl, err := v.control(ctx, name)
	if err != nil {
		return Doc{}, err
	}
	if ctl.Sink {
		return Doc{}, ownStore(name)
	}
	bucket := ctl.bucket(v.ns, name, ctl.Active)
	kv, err := v.js.KeyValue(ctx, bucket)
	if err != nil {
		return Doc{}, fmt.Errorf("view %s: %w", name, err)
	}
	snap := v.snaps.reader(v.js, wire.KVStream(bucket))
	if w.After > 0 {
		if err := v.checkPosition(ctx, w.After); err != nil {
			return Doc{}, err
		}
	}
	if w.For <= 0 {
		w.For = 5 * time.Second
	}
	parts := max(ctl.Partitions, 1)
	waitStart := time.Now()
	deadline := waitStart.Add(w.For)
	for sleep, tries := time.Millisecond, 0; ; sleep = min(sleep*2, 20*time.Millisecond) {
		// Pending requests first: an owner deletes a request only after
		// its heartbeat says what the request changed.
		pend := w.After > 0 && v.pending(ctx, cs, name)
		var before standing // nil holds 0: a read without a position goes to the document at once
		if w.After > 0 {
			// While waiting, the checkpoints alone.
			if before, _, err = readSnapshot(ctx, snap, bucket, parts, ""); err != nil {
				return Doc{}, err
			}
		}
		if before.holds() >= w.After {
			// The checkpoints again with the document, as one copy of the
			// bucket held them: a replica behind the one that answered
			// above answers with its own, older checkpoints, never with
			// an older document under the newer ones.
			st, d, err := readSnapshot(ctx, snap, bucket, parts, key)
			if err != nil {
				return Doc{}, err
			}
			if pos := st.holds(); pos >= w.After {
				if d == nil || wire.IsKVDeleteOp(d.Header.Get(wire.HeaderKVOperation)) {
					return Doc{}, fmt.Errorf("%w: view %s has no document %q", ErrNotFound, name, key)
				}
				after, _, err := readSnapshot(ctx, snap, bucket, parts, "")
				if err != nil {
					return Doc{}, err
				}
				tries++
				if st.sameWriters(after) || w.After == 0 && tries >= 3 {
					if !st.sameWriters(after) {
						pos = 0 // owners changing under every read: claim nothing
					}
					return Doc{View: name, Key: key, Value: d.Data, Revision: d.Sequence, Generation: ctl.Active, Position: pos}, nil
				}
				// A new owner (or a reset) between the reads: read again.
				if time.Now().After(deadline) {
					return Doc{}, fmt.Errorf("%w: view %s changed owners under every read for %s", ErrNotYet, name, w.For)
				}
				continue
			}
			before = st // a copy behind the first answered: wait as for any
		}
		if err := v.behind(ctx, cs, ctl, kv, name, before, w.After, pend, time.Since(waitStart)); err != nil {
			return Doc{}, err
		}
		if time.Now().After(deadline) {
			return Doc{}, fmt.Errorf("%w: view %s stands at position %d, not yet %d after %s", ErrNotYet, name, before.holds(), w.After, w.For)
		}
		select {
		case <-ctx.Done():
			return Doc{}, ctx.Err()
		case <-time.After(sleep):
		}
	}
}

// checkPosition refuses a position that names no decision of the log.
func (v *Views) checkPosition(ctx context.Context, after uint64) error {
	seq, _ := wire.SplitPosition(after)
	if seq == 0 {
		return fmt.Errorf("%w: position %d names no decision (a position is a decision's log sequence times %d plus an event's index); pass a position a command's result gave", ErrInvalid, after, wire.EventPosition(1, 0))
	}
	events, err := v.js.Stream(ctx, v.names.Events)
	if err != nil {
		return err
	}
	_, err = events.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("%w: position %d: the log has no decision at seq %d; pass a position a command's result gave", ErrInvalid, after, seq)
	}
	if err != nil {
		return fmt.Errorf("position %d: read the log at seq %d: %w", after, seq, err)
	}
	return nil
}

// behind says why a view that stands before position after will not get
// there (nil: it may, wait): a parked event up to it, a stopped single
// projection, a pause, a partition behind with no owner.
func (v *Views) behind(ctx context.Context, cs controlStore, ctl Control, kv jetstream.KeyValue, name string, st standing, after uint64, pend bool, waited time.Duration) error {
	for part, cp := range st {
		if cp.holds() >= after {
			continue
		}
		if cp.Parked > 0 && cp.Parked <= after && !pend {
			return parkedError(ctx, kv, part, cp.Parked, after)
		}
		if cp.Position >= after {
			continue // only a parked event keeps it short of after
		}
		l, rev, err := cs.lease(ctx, name, ctl.Active, part)
		if err != nil {
			return err
		}
		silent := time.Since(l.Heartbeat)
		switch {
		case ctl.Paused:
			return fmt.Errorf("%w: view %s is paused at position %d (esjet projections resume %s)", ErrStopped, name, st.holds(), name)
		case rev == 0 && waited < v.leaseTTL:
			// No owner yet (a node starting, a clean handover): one takes
			// the partition within a heartbeat; wait a lease TTL for it.
		case rev > 0 && silent > v.leaseTTL && (waited < v.leaseTTL || silent <= 2*v.leaseTTL):
			// The owner went silent (killed, or stopped for a restart): a
			// lease is free to take only from a lease TTL after its last
			// heartbeat, so a live node takes it a heartbeat after that.
			// Wait one more lease TTL for the handover — from the read's
			// start too, for a lease long silent (a generation switched
			// back to) — before saying no node runs it.
		case l.State == StateNewerBuild && waited >= v.leaseTTL:
			return fmt.Errorf("%w: view %s partition %d stands at position %d, before a message a newer build wrote; a node of that build serves it (upgrade the nodes): %s", ErrStopped, name, part, cp.Position, l.Error)
		case l.State == StateNewerBuild:
			// Handed over: a node of the newer build takes it within a
			// heartbeat.
		case rev == 0 || silent > v.leaseTTL:
			return fmt.Errorf("%w: no node runs view %s partition %d (last heartbeat %s); it stands at position %d", ErrStopped, name, part, l.Heartbeat.Format(time.RFC3339), cp.Position)
		case l.State == StateStopped && l.StoppedAt <= after && !pend:
			return fmt.Errorf("%w: view %s is stopped at a failing event before position %d: %s (esjet projections parked %s)", ErrParked, name, after, l.Error, name)
		}
	}
	return nil
}

// parkedError names the parked event at pos that keeps the view short of
// position after.
func parkedError(ctx context.Context, kv jetstream.KeyValue, part int, pos, after uint64) error {
	var r Parked
	if e, err := kv.Get(ctx, parkKey(part, pos)); err == nil {
		_ = json.Unmarshal(e.Value(), &r)
	}
	return fmt.Errorf("%w: the view holds parked event %d of %s/%s (%s), at or before position %d; esjet projections retry or skip it", ErrParked,
		pos, firstNonEmpty(r.Event.AggregateType, "?"), firstNonEmpty(r.Event.AggregateID, "?"), firstNonEmpty(r.Error, "behind an earlier parked event"), after)
}

// standing is where each partition of a generation stands, by its stored
// checkpoint (the zero Checkpoint: never written).
type standing []Checkpoint

// readSnapshot reads where each partition stands and (key set) the
// document under key, as one copy of the bucket held them at one instant
// (d nil: no document). Unlike reads one key at a time, which replicas at
// different points may answer, the document is then at least as new as
// the checkpoints say.
func readSnapshot(ctx context.Context, r *streams.SnapshotReader, bucket string, parts int, key string) (standing, *jetstream.RawStreamMsg, error) {
	subjects := make([]string, 0, parts+1)
	for part := range parts {
		subjects = append(subjects, wire.KVSubject(bucket, cpKey(part)))
	}
	if key != "" {
		subjects = append(subjects, wire.KVSubject(bucket, key))
	}
	msgs, err := r.Read(ctx, subjects)
	if err != nil {
		return nil, nil, err
	}
	st := make(standing, parts)
	for part := range parts {
		m := msgs[subjects[part]]
		if m == nil || wire.IsKVDeleteOp(m.Header.Get(wire.HeaderKVOperation)) {
			continue
		}
		if err := json.Unmarshal(m.Data, &st[part]); err != nil {
			return nil, nil, fmt.Errorf("checkpoint %s of %s: %w", cpKey(part), bucket, err)
		}
	}
	var d *jetstream.RawStreamMsg
	if key != "" {
		d = msgs[subjects[parts]]
	}
	return st, d, nil
}

// holds is the position up to which the view holds every event: the
// lowest of its partitions'.
func (s standing) holds() uint64 {
	var low uint64
	for i, cp := range s {
		if h := cp.holds(); i == 0 || h < low {
			low = h
		}
	}
	return low
}

// sameWriters says whether every partition's checkpoint was written by the
// same owner in s and later, without going back: what was read between
// them was written on top of s (a reset or a purged slot gives the next
// checkpoint another owner's token).
func (s standing) sameWriters(later standing) bool {
	for i := range s {
		if later[i].Token != s[i].Token || later[i].Position < s[i].Position {
			return false
		}
	}
	return true
}

func ownStore(name string) error {
	return fmt.Errorf("%w: %s is a Sink: its documents and their position are in your store (Sink.Position says up to which position it holds every event); esjet cannot answer for it", ErrOwnStore, name)
}

// pending says whether an operator's request on the projection waits to be
// done (a retry or skip may unblock the wait).
func (v *Views) pending(ctx context.Context, cs controlStore, name string) bool {
	reqs, err := cs.requests(ctx, name)
	return err == nil && len(reqs) > 0
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func readCheckpoint(ctx context.Context, kv jetstream.KeyValue, part int) (Checkpoint, error) {
	var cp Checkpoint
	e, err := kv.Get(ctx, cpKey(part))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return cp, nil
	}
	if err != nil {
		return cp, err
	}
	return cp, json.Unmarshal(e.Value(), &cp)
}

// List returns a page of the active generation's documents in key order.
func (v *Views) List(ctx context.Context, name string, q ListQuery) (Page, error) {
	if q.Limit == 0 {
		q.Limit = 100
	}
	if q.Limit < 1 || q.Limit > 1000 {
		return Page{}, invalid("limit must be 1 to 1000 documents, got %d", q.Limit)
	}
	_, ctl, err := v.control(ctx, name)
	if err != nil {
		return Page{}, err
	}
	if ctl.Sink {
		return Page{}, ownStore(name)
	}
	kv, err := v.js.KeyValue(ctx, ctl.bucket(v.ns, name, ctl.Active))
	if err != nil {
		return Page{}, fmt.Errorf("view %s: %w", name, err)
	}
	page := Page{View: name, Generation: ctl.Active, Docs: []Doc{}}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return page, err
	}
	var keys []string
	for k := range lister.Keys() {
		if !isInternal(k) && strings.HasPrefix(k, q.Prefix) && k > q.Cursor {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if len(keys) > q.Limit {
		keys = keys[:q.Limit]
		page.Cursor = keys[len(keys)-1]
	}
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue // deleted meanwhile
		}
		page.Docs = append(page.Docs, Doc{View: name, Key: k, Value: e.Value(), Revision: e.Revision(), Generation: ctl.Active})
	}
	return page, nil
}

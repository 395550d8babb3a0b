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
	// Position is the checkpoint of the document's partition when read:
	// every event up to it is in the view.
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
// name, after waiting (bounded) for w.After when set. The wait ends at once
// with [ErrParked] when an event of the position's aggregate up to it is
// parked (or a single projection stopped before it), with [ErrStopped]
// when the view is paused or no owner runs it, and with [ErrNotYet] when
// the bound passes.
func (v *Views) Get(ctx context.Context, name, key string, w Wait) (Doc, error) {
	if err := ValidateKey(key); err != nil {
		return Doc{}, err
	}
	cs, ctl, err := v.control(ctx, name)
	if err != nil {
		return Doc{}, err
	}
	kv, err := v.js.KeyValue(ctx, ctl.bucket(v.ns, name, ctl.Active))
	if err != nil {
		return Doc{}, fmt.Errorf("view %s: %w", name, err)
	}
	var pos uint64
	if w.After > 0 {
		if pos, err = v.wait(ctx, cs, ctl, kv, name, w); err != nil {
			return Doc{}, err
		}
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return Doc{}, fmt.Errorf("%w: view %s has no document %q", ErrNotFound, name, key)
	}
	if err != nil {
		return Doc{}, err
	}
	return Doc{View: name, Key: key, Value: e.Value(), Revision: e.Revision(), Generation: ctl.Active, Position: pos}, nil
}

// wait polls the checkpoint of the partition holding w.After's aggregate.
func (v *Views) wait(ctx context.Context, cs controlStore, ctl Control, kv jetstream.KeyValue, name string, w Wait) (uint64, error) {
	if w.For <= 0 {
		w.For = 5 * time.Second
	}
	events, err := v.js.Stream(ctx, v.names.Events)
	if err != nil {
		return 0, err
	}
	seq, _ := wire.SplitPosition(w.After)
	if seq == 0 {
		return 0, fmt.Errorf("%w: position %d names no decision (a position is a decision's log sequence times %d plus an event's index); pass a position a command's result gave", ErrInvalid, w.After, wire.EventPosition(1, 0))
	}
	m, err := events.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, fmt.Errorf("%w: position %d: the log has no decision at seq %d; pass a position a command's result gave", ErrInvalid, w.After, seq)
	}
	if err != nil {
		return 0, fmt.Errorf("position %d: read the log at seq %d: %w", w.After, seq, err)
	}
	part := PartitionOf(m.Subject, max(ctl.Partitions, 1))
	waitStart := time.Now()
	deadline := waitStart.Add(w.For)
	for sleep := time.Millisecond; ; sleep = min(sleep*2, 20*time.Millisecond) {
		// Pending requests first: an owner deletes a request only after
		// its heartbeat says what the request changed.
		pend := v.pending(ctx, cs, name)
		cp, err := readCheckpoint(ctx, kv, part)
		if err != nil {
			return 0, err
		}
		if cp.Position >= w.After {
			if err := v.parkedBefore(ctx, kv, part, m.Subject, w.After); err != nil && !pend {
				return 0, err
			} else if err == nil {
				return cp.Position, nil
			}
		}
		l, rev, err := cs.lease(ctx, name, ctl.Active, part)
		if err != nil {
			return 0, err
		}
		switch {
		case ctl.Paused:
			return 0, fmt.Errorf("%w: view %s is paused at position %d (esjet projections resume %s)", ErrStopped, name, cp.Position, name)
		case rev == 0 && time.Since(waitStart) < v.leaseTTL:
			// No owner yet (a node starting, a clean handover): one takes
			// the partition within a heartbeat; wait a lease TTL for it.
		case rev == 0 || time.Since(l.Heartbeat) > v.leaseTTL:
			return 0, fmt.Errorf("%w: no node runs view %s partition %d (last heartbeat %s); it stands at position %d", ErrStopped, name, part, l.Heartbeat.Format(time.RFC3339), cp.Position)
		case l.State == StateStopped && l.StoppedAt <= w.After && !pend:
			return 0, fmt.Errorf("%w: view %s is stopped at a failing event before position %d: %s (esjet projections parked %s)", ErrParked, name, w.After, l.Error, name)
		}
		if err := v.parkedBefore(ctx, kv, part, m.Subject, w.After); err != nil && !pend {
			return 0, err
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%w: view %s stands at position %d, not yet %d after %s", ErrNotYet, name, cp.Position, w.After, w.For)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(sleep):
		}
	}
}

// pending says whether an operator's request on the projection waits to be
// done (a retry or skip may unblock the wait).
func (v *Views) pending(ctx context.Context, cs controlStore, name string) bool {
	reqs, err := cs.requests(ctx, name)
	return err == nil && len(reqs) > 0
}

// parkedBefore fails when an event of subject's aggregate up to position
// after is parked: the view will not hold it.
func (v *Views) parkedBefore(ctx context.Context, kv jetstream.KeyValue, part int, subject string, after uint64) error {
	recs, err := listParked(ctx, kv, part)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if r.Subject == subject && r.Event.Position <= after {
			return fmt.Errorf("%w: the view holds parked event %d of %s/%s (%s); esjet projections retry or skip it", ErrParked,
				r.Event.Position, r.Event.AggregateType, r.Event.AggregateID, firstNonEmpty(r.Error, "behind an earlier parked event"))
		}
	}
	return nil
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

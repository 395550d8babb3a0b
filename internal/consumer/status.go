package consumer

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

// KindStatus is what an operator sees of one command kind across the
// fleet: whether it is paused, what waits, and how old the oldest command
// not yet done is.
type KindStatus struct {
	Kind   string `json:"kind"`
	Paused bool   `json:"paused"`
	// By, At, Reason: the last pause or resume record.
	By     string `json:"by,omitempty"`
	At     string `json:"at,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Backlog are the commands no worker has taken yet.
	Backlog uint64 `json:"backlog"`
	// InFlight are the commands taken and not done: running, waiting for
	// their turn (rate limit), or waiting for a retry.
	InFlight int `json:"in_flight"`
	// Oldest is when the oldest command not done yet was written to
	// OUTBOX; OldestAge its age in seconds (0: none).
	Oldest    time.Time `json:"oldest,omitzero"`
	OldestAge float64   `json:"oldest_age_seconds"`
	// Rate and Burst are the answering node's rate limit for the kind (0:
	// none, or the node does not serve it).
	Rate  float64 `json:"rate,omitempty"`
	Burst int     `json:"burst,omitempty"`
	// Waiting are the commands of a schema newer than the workers that
	// received them understood, left for a newer worker (deferral.go):
	// nonzero in a rolling upgrade, or while no node understands them.
	Waiting int `json:"waiting_for_newer_worker,omitempty"`
}

// Statuses returns the status of every kind that has a worker consumer on
// OUTBOX or a pause record, sorted by kind. limits gives the rate limits
// this node knows (by kind; may be nil).
func (c *Control) Statuses(ctx context.Context, js jetstream.JetStream, ns string, limits map[string]KindConfig) ([]KindStatus, error) {
	names := streams.NamesFor(ns)
	stream, err := js.Stream(ctx, names.Outbox)
	if err != nil {
		return nil, fmt.Errorf("workers' status: %s: %w", names.Outbox, err)
	}
	byKind := map[string]*KindStatus{}
	get := func(kind string) *KindStatus {
		st, ok := byKind[kind]
		if !ok {
			st = &KindStatus{Kind: kind}
			byKind[kind] = st
		}
		return st
	}
	lister := stream.ListConsumers(ctx)
	for info := range lister.Info() {
		kind, priority, ok := wire.KindOfBandConsumer(info.Name) // every band of the kind, together
		if !ok {
			continue
		}
		st := get(kind)
		st.Backlog += info.NumPending
		st.InFlight += info.NumAckPending
		if info.NumPending+uint64(info.NumAckPending) == 0 {
			continue
		}
		// Every command up to the ack floor is done; the first of the
		// band's after it is not.
		m, err := stream.GetMsg(ctx, info.AckFloor.Stream+1, jetstream.WithGetMsgSubject(wire.BandSubject(ns, kind, priority)))
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return nil, fmt.Errorf("workers' status: oldest command of %s: %w", kind, err)
		case st.Oldest.IsZero() || m.Time.Before(st.Oldest):
			st.Oldest = m.Time.UTC()
			st.OldestAge = time.Since(m.Time).Seconds()
		}
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("workers' status: list the consumers of %s: %w", names.Outbox, err)
	}
	pauses, err := c.readPauses(ctx)
	if err != nil {
		return nil, err
	}
	for kind, rec := range pauses {
		st := get(kind)
		st.Paused, st.By, st.At, st.Reason = rec.Paused, rec.By, rec.At, rec.Reason
	}
	waiting, err := c.Waiting(ctx)
	if err != nil {
		return nil, fmt.Errorf("workers' status: %w", err)
	}
	for kind, n := range waiting {
		get(kind).Waiting = n
	}
	for kind, kc := range limits {
		if kc.Rate > 0 {
			st := get(kind)
			st.Rate, st.Burst = kc.Rate, max(kc.Burst, 1)
		}
	}
	out := make([]KindStatus, 0, len(byKind))
	for _, st := range byKind {
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b KindStatus) int { return strings.Compare(a.Kind, b.Kind) })
	return out, nil
}

// readPauses reads every pause record from the bucket (not this node's
// watcher, which may lag a pause just made on another node).
func (c *Control) readPauses(ctx context.Context) (map[string]wire.PauseRecord, error) {
	keys, err := c.kv.ListKeysFiltered(ctx, wire.PauseWatch)
	if err != nil {
		return nil, fmt.Errorf("workers' status: list the pause records: %w", err)
	}
	out := map[string]wire.PauseRecord{}
	for key := range keys.Keys() {
		kind := wire.KindOfPauseKey(key)
		e, err := c.kv.Get(ctx, key)
		if kind == "" || errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("workers' status: read %s: %w", key, err)
		}
		var rec wire.PauseRecord
		if json.Unmarshal(e.Value(), &rec) == nil {
			rec.Kind = kind
			out[kind] = rec
		}
	}
	return out, nil
}

// Waiting counts, by kind, the commands waiting for a newer worker across
// the fleet: the deferral records in the workers' bucket (a command is
// counted from its first deferral until a worker that understands it
// finishes it).
func (c *Control) Waiting(ctx context.Context) (map[string]int, error) {
	keys, err := c.kv.ListKeysFiltered(ctx, wire.DeferWatch)
	if err != nil {
		return nil, fmt.Errorf("list the deferral records: %w", err)
	}
	out := map[string]int{}
	for key := range keys.Keys() {
		if kind := wire.KindOfDeferKey(key); kind != "" {
			out[kind]++
		}
	}
	return out, nil
}

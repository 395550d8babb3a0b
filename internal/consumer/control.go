package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Flow control held across the fleet, in KV <ns>_workers (wire.PauseKey and
// friends): every node serving a kind reads and writes the same keys, so a
// pause, a rate limit or a per-key limit holds whatever the number of
// nodes, never per node.

// ErrNotPaused, ErrAlreadyPaused: a resume of a kind that is not paused, a
// pause of one that is.
var (
	ErrNotPaused     = errors.New("consumer: the kind is not paused")
	ErrAlreadyPaused = errors.New("consumer: the kind is paused already")
)

// Control is a namespace's flow control for its workers: the pause records
// (watched, so a pause reaches every node's workers within a round trip)
// and the rate limits' token buckets. One per node, shared by its workers.
type Control struct {
	kv       jetstream.KeyValue
	logger   *slog.Logger
	w        jetstream.KeyWatcher
	stopOnce sync.Once

	mu      sync.Mutex
	pauses  map[string]wire.PauseRecord
	changed chan struct{} // closed and replaced at every change of pauses
}

// OpenControl opens the namespace's workers bucket and reads the pause
// records, so a kind paused before this node started is paused from its
// first fetch. Run follows the changes. logger may be nil.
func OpenControl(ctx context.Context, js jetstream.JetStream, ns string, logger *slog.Logger) (*Control, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	bucket := streams.NamesFor(ns).Workers
	kv, err := streams.BindBucket(ctx, js, bucket)
	if err != nil {
		return nil, fmt.Errorf("workers' control bucket %s: %w", bucket, err)
	}
	// The watcher outlives ctx (Run stops it).
	w, err := kv.Watch(context.WithoutCancel(ctx), wire.PauseWatch)
	if err != nil {
		return nil, fmt.Errorf("watch %s in %s: %w", wire.PauseWatch, bucket, err)
	}
	c := &Control{kv: kv, logger: logger.With("component", "workers-control"), w: w,
		pauses: map[string]wire.PauseRecord{}, changed: make(chan struct{})}
	for {
		select {
		case <-ctx.Done():
			_ = w.Stop()
			return nil, fmt.Errorf("read the pause records in %s: %w", bucket, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("read the pause records in %s: the watcher stopped", bucket)
			}
			if e == nil {
				return c, nil // the current records are in
			}
			c.apply(e)
		}
	}
}

// Run follows the pause records until ctx ends or Stop is called.
func (c *Control) Run(ctx context.Context) error {
	defer c.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-c.w.Updates():
			if !ok {
				return nil // stopped
			}
			if e != nil {
				c.apply(e)
			}
		}
	}
}

// Stop stops following the pause records (what is known stays). It is
// idempotent.
func (c *Control) Stop() { c.stopOnce.Do(func() { _ = c.w.Stop() }) }

// apply takes one pause record (or its deletion) in.
func (c *Control) apply(e jetstream.KeyValueEntry) {
	kind := wire.KindOfPauseKey(e.Key())
	if kind == "" {
		return
	}
	var rec wire.PauseRecord
	if e.Operation() == jetstream.KeyValuePut {
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			// Not one of ours: the kind stays as it was rather than run
			// on a record nobody can read.
			c.logger.Error("unreadable pause record; the kind's state is unchanged", "key", e.Key(), "error", err)
			return
		}
	}
	rec.Kind = kind
	c.mu.Lock()
	defer c.mu.Unlock()
	if was := c.pauses[kind]; was.Paused != rec.Paused {
		c.logger.Info("kind "+map[bool]string{true: "paused", false: "resumed"}[rec.Paused], "kind", kind, "by", rec.By, "reason", rec.Reason)
	}
	c.pauses[kind] = rec
	close(c.changed)
	c.changed = make(chan struct{})
}

// Pause returns kind's pause record (Paused false if it is not paused) and
// a channel closed at the next change of any record.
func (c *Control) Pause(kind string) (wire.PauseRecord, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, ok := c.pauses[kind]
	if !ok {
		rec.Kind = kind
	}
	return rec, c.changed
}

// Pauses are the pause records this node knows, by kind (resumed kinds
// included: their record says who resumed them).
func (c *Control) Pauses() map[string]wire.PauseRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]wire.PauseRecord, len(c.pauses))
	for k, v := range c.pauses {
		out[k] = v
	}
	return out
}

// SetPaused pauses (paused true) or resumes kind across the fleet, recording
// by and reason. The change is made by compare-and-set on the record: two
// operators pausing at once get one pause and one [ErrAlreadyPaused].
func (c *Control) SetPaused(ctx context.Context, kind string, paused bool, by, reason string) (wire.PauseRecord, error) {
	if err := wire.ValidateToken("command kind", kind); err != nil {
		return wire.PauseRecord{}, err
	}
	key := wire.PauseKey(kind)
	var was wire.PauseRecord
	var rev uint64
	e, err := c.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return wire.PauseRecord{}, fmt.Errorf("read the pause record of %s: %w", kind, err)
	default:
		rev = e.Revision()
		_ = json.Unmarshal(e.Value(), &was)
	}
	switch {
	case paused && was.Paused:
		return was, fmt.Errorf("%w: %s, by %s at %s", ErrAlreadyPaused, kind, was.By, was.At)
	case !paused && !was.Paused:
		return was, fmt.Errorf("%w: %s", ErrNotPaused, kind)
	}
	rec := wire.PauseRecord{Kind: kind, Paused: paused, By: by, At: time.Now().UTC().Format(time.RFC3339), Reason: reason}
	if err := writeRecord(ctx, c.kv, key, rev, rec); err != nil {
		if isWrongLast(err) {
			return wire.PauseRecord{}, fmt.Errorf("the pause record of %s changed meanwhile (another operator?); look again and retry: %w", kind, err)
		}
		return wire.PauseRecord{}, fmt.Errorf("the pause record of %s: %w", kind, err)
	}
	return rec, nil
}

// isWrongLast reports a compare-and-set that lost: the key changed (or
// appeared) since it was read.
func isWrongLast(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) ||
		(errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == 10164))
}

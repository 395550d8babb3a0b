package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/shred"
	"github.com/esjet/esjet/internal/wire"
)

// Concurrency per key, across the fleet: at most max calls at once for one
// value of the kind's concurrency key (a payload field, or the issuing
// aggregate's id). A call in flight holds one of the value's slots, the KV
// key wire.KeyLeaseKey(kind, value, slot) of <ns>_workers, taken with
// Create (one winner across every node) and a per-key TTL a bit longer
// than the kind's timeout (or AckWait, if longer), renewed every third of
// it while the call runs and purged when the call is over. A node that dies
// holding a slot frees it when the TTL runs out: the call it left running
// at the target, which the node would have given up at its timeout, is
// over by then (the slot is renewed right before the call, so the TTL
// counts from the call's start at the latest).
//
// A delivery whose key is busy waits for it holding its lease (renewed
// with in-progress acks) but not its place in the pool, so the pool pulls
// commands of other keys meanwhile. It counts no attempt (the worker's
// attempt is the server's delivery count, which only a redelivery raises)
// and never dead-letters for waiting. Each node's watcher of the kind's
// leases wakes the waiters of a key when one of its slots is released or
// expires; a waiter also tries again at each lease renewal, in case it
// missed one.

// ConcurrencyKeyAggregateID as a kind's concurrency key means the issuing
// aggregate's id (any other value is a payload field path).
const ConcurrencyKeyAggregateID = "aggregate_id"

// keyWaitersMax bounds the deliveries one node holds waiting for their key
// (beside its pool): past it the node pulls nothing more until one starts.
// Each holds a lease, renewed every third of AckWait.
const keyWaitersMax = 256

// errNoKey: a command whose concurrency key cannot be read from it.
var errNoKey = errors.New("no concurrency key")

// keyLimit is one kind's per-key limit on this node.
type keyLimit struct {
	kind, node string
	path       []string // payload field path; nil: the aggregate id
	max        int
	ttl        time.Duration
	kv         jetstream.KeyValue
	js         jetstream.JetStream
	bucket     string

	mu      sync.Mutex
	changed map[string]chan struct{} // by lease prefix: closed when a slot of it is released
}

func newKeyLimit(cfg KindConfig, js jetstream.JetStream, bucket string) *keyLimit {
	k := &keyLimit{kind: cfg.Kind, node: cfg.Node, max: max(cfg.Concurrency, 1), js: js, bucket: bucket,
		kv: cfg.Control.kv, ttl: keyTTL(max(cfg.AckWait, cfg.Timeout)), changed: map[string]chan struct{}{}}
	if cfg.ConcurrencyKey != ConcurrencyKeyAggregateID {
		k.path = strings.Split(cfg.ConcurrencyKey, ".")
	}
	return k
}

// keyTTL is a slot's TTL for a call that may last a (the kind's timeout,
// or AckWait if longer): a bit longer, in whole seconds (the server counts
// Nats-TTL in seconds).
func keyTTL(a time.Duration) time.Duration {
	return (a + time.Second + time.Second - 1).Truncate(time.Second)
}

// valueOf is d's concurrency key: the aggregate id, or the payload field
// (a string, a number or a bool, as its JSON text reads without quotes).
func (k *keyLimit) valueOf(d Delivery) (string, error) {
	if k.path == nil {
		if d.AggregateID == "" {
			return "", fmt.Errorf("%w: concurrency_key is the aggregate id, and the command has none", errNoKey)
		}
		return d.AggregateID, nil
	}
	field := strings.Join(k.path, ".")
	raw := d.Payload
	for _, name := range k.path {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return "", fmt.Errorf("%w: concurrency_key %s: the payload is not an object at %q", errNoKey, field, name)
		}
		var ok bool
		if raw, ok = obj[name]; !ok {
			return "", fmt.Errorf("%w: concurrency_key %s: the payload has no field %q", errNoKey, field, name)
		}
	}
	if ref, ok := shred.SubjectRef(raw); ok {
		// A personal field, sealed in OUTBOX: keyed by its data subject's
		// ref, so the person's id is never a KV key name.
		return "subject-" + ref, nil
	}
	var v any
	_ = json.Unmarshal(raw, &v)
	switch v := v.(type) {
	case string:
		if v != "" {
			return v, nil
		}
	case float64, bool:
		return strings.TrimSpace(string(raw)), nil
	}
	return "", fmt.Errorf("%w: concurrency_key %s is %s; want a string, a number or a bool", errNoKey, field, strings.TrimSpace(string(raw)))
}

// wakeup returns a channel closed when a slot of value is released (ask
// before trying, so a release in between is not missed).
func (k *keyLimit) wakeup(value string) <-chan struct{} {
	p := wire.KeyLeasePrefix(k.kind, value)
	k.mu.Lock()
	defer k.mu.Unlock()
	ch, ok := k.changed[p]
	if !ok {
		ch = make(chan struct{})
		k.changed[p] = ch
	}
	return ch
}

// released wakes the waiters of the value whose lease key was released.
func (k *keyLimit) released(key string) {
	p := wire.KeyLeasePrefixOf(key)
	k.mu.Lock()
	defer k.mu.Unlock()
	if ch, ok := k.changed[p]; ok {
		close(ch)
		delete(k.changed, p)
	}
}

// watch follows the kind's leases until ctx ends, waking waiters at every
// release (a purge, a delete or an expiry).
func (k *keyLimit) watch(ctx context.Context) error {
	w, err := k.kv.Watch(ctx, wire.KeyLeaseWatch(k.kind), jetstream.UpdatesOnly())
	if err != nil {
		return fmt.Errorf("watch the concurrency keys of %s: %w", k.kind, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return nil
			}
			if e != nil && e.Operation() != jetstream.KeyValuePut {
				k.released(e.Key())
			}
		}
	}
}

// keySlot is a held slot of one key value.
type keySlot struct {
	k           *keyLimit
	key         string
	value       []byte
	renewMu     sync.Mutex // one renewal at a time: each expects the last one's revision
	mu          sync.Mutex
	rev         uint64
	renewed     time.Time // when the last renewal (or the create) that landed was sent
	stop        context.CancelFunc
	renewing    sync.WaitGroup
	releaseOnce sync.Once
	lost        bool // a renewal found the key changed: it expired under us
}

// tryAcquire takes a free slot of value for command id: nil when they are
// all taken.
func (k *keyLimit) tryAcquire(ctx context.Context, value, id string) (*keySlot, error) {
	b, _ := json.Marshal(wire.KeyLease{CommandID: id, Node: k.node, At: time.Now().UTC().Format(time.RFC3339Nano)})
	for slot := range k.max {
		key := wire.KeyLeaseKey(k.kind, value, slot)
		sent := time.Now()
		rev, err := k.kv.Create(ctx, key, b, jetstream.KeyTTL(k.ttl))
		switch {
		case err == nil:
			s := &keySlot{k: k, key: key, value: b, rev: rev, renewed: sent}
			rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			s.stop = cancel
			s.renewing.Go(func() { s.keep(rctx) })
			return s, nil
		case errors.Is(err, jetstream.ErrKeyExists):
		default:
			return nil, fmt.Errorf("take concurrency key %s: %w", key, err)
		}
	}
	return nil, nil
}

// keep renews the slot's TTL every third of it until ctx ends. A renewal
// that finds the key changed (it expired: no renewal landed for a whole
// TTL) stops: the slot is no longer ours.
func (s *keySlot) keep(ctx context.Context) {
	t := time.NewTicker(s.k.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.renew(ctx); errors.Is(err, errKeyLost) {
			return
		}
	}
}

// errKeyLost: a slot's key expired under its holder (no renewal landed
// for a whole TTL) and may be someone else's now.
var errKeyLost = errors.New("concurrency key expired under its holder")

// renew restarts the slot's TTL from now.
func (s *keySlot) renew(ctx context.Context) error {
	s.renewMu.Lock()
	defer s.renewMu.Unlock()
	s.mu.Lock()
	rev, lost := s.rev, s.lost
	s.mu.Unlock()
	if lost {
		return errKeyLost
	}
	m := &nats.Msg{Subject: wire.KeyLeaseSubject(s.k.bucket, s.key), Data: s.value, Header: nats.Header{}}
	sent := time.Now()
	ack, err := s.k.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(s.k.ttl))
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		s.rev, s.renewed = ack.Sequence, sent
		return nil
	case isWrongLast(err):
		s.lost = true
		return errKeyLost
	}
	return err
}

// keyFreshFor is how recently a slot must have been renewed for a call to
// start under it without renewing it first: the TTL must outlast the
// call's timeout, counted from the call's start.
func (s *keySlot) keyFreshFor(timeout time.Duration) time.Duration {
	return max(s.k.ttl-timeout-time.Second/2, 0)
}

// fresh makes sure the slot outlives a call of up to timeout that starts
// now (a node killed mid-call holds the key until that call is over),
// renewing it unless it was renewed just now. An error: the key may not
// be ours for that long, so the call must not start.
func (s *keySlot) fresh(ctx context.Context, timeout time.Duration) error {
	s.mu.Lock()
	age := time.Since(s.renewed)
	s.mu.Unlock()
	if age <= s.keyFreshFor(timeout) {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.renew(rctx); err != nil {
		return fmt.Errorf("renew concurrency key %s before the call: %w", s.key, err)
	}
	return nil
}

// release gives the slot back (purged only if it is still ours; the purge
// marker itself expires). A release that fails leaves the key to its TTL.
func (s *keySlot) release(ctx context.Context) error {
	var err error
	s.releaseOnce.Do(func() {
		s.stop()
		s.renewing.Wait()
		s.mu.Lock()
		rev, lost := s.rev, s.lost
		s.mu.Unlock()
		if lost {
			err = fmt.Errorf("concurrency key %s expired while its call ran (no renewal landed for %s)", s.key, s.k.ttl)
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		err = s.k.kv.Purge(rctx, s.key, jetstream.LastRevision(rev), jetstream.PurgeTTL(time.Second))
		if err != nil && isWrongLast(err) {
			err = nil // expired, and maybe someone else's now: nothing of ours to purge
		}
	})
	return err
}

package receiver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

var (
	// ErrConflict means the key was already used with different parameters
	// (their SHA-256 digests differ). It is terminal: the caller reused an
	// idempotency key for another request.
	ErrConflict = errors.New("receiver: idempotency key reused with different parameters")
	// ErrInProgress means another delivery of the key holds a fresh claim
	// and ctx ended while Do waited for it to finish. It is retryable.
	ErrInProgress = errors.New("receiver: another delivery of this key is in progress")
	// ErrNotRecorded means the effect ran and succeeded, but its result
	// could not be stored: Do returns the result with this error. Report
	// success to the producer if you can; a later delivery finds the claim
	// unfinished and, after Lease, runs the effect again.
	ErrNotRecorded = errors.New("receiver: the effect ran but its result was not recorded")
	// ErrInvalidKey means the idempotency key is empty or longer than
	// [MaxKeyLen].
	ErrInvalidKey = errors.New("receiver: invalid idempotency key")
	// ErrStale means the attempt's fence is lower than one already seen for
	// the key: a newer delivery of the same command exists, and the worker
	// that sent this one lost its lease. The effect did not run. Tell the
	// producer so and do not retry: esjet's workers take
	// {"error": …, "stale": true} (NATS) or 412 Precondition Failed (HTTP)
	// as "stale" and let the newer delivery finish.
	ErrStale = errors.New("receiver: a newer attempt of this key was seen")
)

// HeaderFence is the request header in which esjet's workers send an
// attempt's fencing token (a decimal number that rises with every delivery
// of a command); pass it to [Receiver.DoFenced], parsed with [ParseFence].
// It is "Esjet-Fence", as the OUTBOX contract (internal/wire) declares it.
const HeaderFence = wire.HeaderFence

// ParseFence reads a [HeaderFence] value; an empty one is 0 (no fence).
func ParseFence(v string) (uint64, error) {
	if v == "" {
		return 0, nil
	}
	f, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("receiver: %s %q is not a decimal number: %w", HeaderFence, v, err)
	}
	return f, nil
}

// Receiver folds repeated deliveries of one idempotency key into one effect.
// It is safe for concurrent use, by any number of goroutines and processes
// sharing its bucket.
type Receiver struct {
	kv    jetstream.KeyValue
	cfg   Config
	owner string // host/pid prefix of every claim's owner
	now   func() time.Time
}

// writeTimeout bounds the writes that must happen even after the caller's
// context ended: recording a result, releasing a claim.
const writeTimeout = 5 * time.Second

// New creates or updates the KV bucket cfg.Bucket (idempotent: receivers on
// many nodes may call it at once) and returns a receiver that keeps its
// receipts there.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Receiver, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	kvc := jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "esjet receiver: idempotency keys, parameter digests and results",
		History:     1,
		TTL:         cfg.Retention,
		Replicas:    cfg.Replicas,
		Storage:     jetstream.FileStorage,
	}
	// Create first: an existing bucket of the same configuration needs no
	// update, which a receiver running inside the node (the node role may
	// create its buckets, never update them) is not allowed to ask for.
	kv, err := js.CreateKeyValue(ctx, kvc)
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = js.CreateOrUpdateKeyValue(ctx, kvc)
	}
	if err != nil {
		return nil, fmt.Errorf("receiver: bucket %s: %w", cfg.Bucket, err)
	}
	host, _ := os.Hostname()
	return &Receiver{kv: kv, cfg: cfg, owner: fmt.Sprintf("%s:%d", host, os.Getpid()), now: time.Now}, nil
}

// Config returns the receiver's configuration with defaults applied.
func (r *Receiver) Config() Config { return r.cfg }

const (
	stateRunning  = "running"
	stateDone     = "done"
	stateReleased = "released" // a fenced attempt failed: the key is free, its fence remembered
)

// record is the JSON value stored under a key.
type record struct {
	State     string          `json:"state"`
	Digest    string          `json:"digest"` // hex SHA-256 of the parameters
	Owner     string          `json:"owner,omitempty"`
	ClaimedAt time.Time       `json:"claimed_at,omitzero"`
	RenewedAt time.Time       `json:"renewed_at,omitzero"`
	Result    json.RawMessage `json:"result,omitempty"`
	DoneAt    time.Time       `json:"done_at,omitzero"`
	// Fence is the highest fencing token seen for the key (0: none).
	Fence uint64 `json:"fence,omitempty"`
}

// Do runs effect at most once per key, in effect: the first delivery of key
// claims it atomically and runs effect; later deliveries with the same
// params get the stored result with replayed=true, without running it.
//
//   - Same key, different params: an error wrapping [ErrConflict].
//   - Another delivery holds a fresh claim: Do waits for it to finish and
//     returns its result (replayed=true), or returns an error wrapping
//     [ErrInProgress] if ctx ends first. If the claim goes stale (Do has
//     seen it not renewed for Lease, by its own clock's elapsed time), Do
//     takes it over — exactly one waiter wins — and runs effect.
//   - effect fails: the claim is released and effect's error is returned
//     unchanged, so callers can classify it; the next delivery runs effect
//     again.
//   - effect succeeds but the result cannot be stored: the result and an
//     error wrapping [ErrNotRecorded].
//
// effect receives ctx. A panic in effect releases the claim and propagates.
//
// Do does not fence: see [Receiver.DoFenced] for deliveries that carry a
// fencing token (esjet's do, in [HeaderFence]).
func (r *Receiver) Do(ctx context.Context, key string, params []byte, effect func(ctx context.Context) (json.RawMessage, error)) (result json.RawMessage, replayed bool, err error) {
	return r.DoFenced(ctx, key, 0, params, effect)
}

// DoFenced is [Receiver.Do] for an attempt that carries fencing token fence
// (esjet's [HeaderFence]: it rises with every delivery of a command). The
// key remembers the highest fence seen, and an attempt with a lower one is
// refused with an error wrapping [ErrStale] without running effect: its
// worker lost its lease to a newer delivery, which may be calling at the
// same moment. An equal fence is the same attempt asking again and is
// folded like any repeat. A key already done replays its result whatever
// the fence (the effect is not run again either way). A failed attempt
// keeps its fence: the key is free to run again, but only for that fence or
// a higher one. Fence 0 means "no fence": nothing is refused.
func (r *Receiver) DoFenced(ctx context.Context, key string, fence uint64, params []byte, effect func(ctx context.Context) (json.RawMessage, error)) (result json.RawMessage, replayed bool, err error) {
	if key == "" || len(key) > MaxKeyLen {
		return nil, false, fmt.Errorf("%w: %d bytes, want 1 to %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	k := encodeKey(key)
	digest := digestOf(params)

	var w jetstream.KeyWatcher
	defer func() {
		if w != nil {
			_ = w.Stop()
		}
	}()
	waiting := false // a fresh claim of another delivery was seen
	// A claim is stale when this delivery has seen its revision stand
	// still for Lease, measured on this process's own clock from when it
	// first saw that revision: no server timestamp is compared with the
	// local clock, so no clock skew, either way, can take over a claim its
	// owner renews nor keep a crashed one for longer than about a lease.
	var seenRev uint64
	var seenAt time.Time
	inProgress := func(err error) error {
		if waiting && ctx.Err() != nil {
			return fmt.Errorf("%w: key %q: %w", ErrInProgress, key, ctx.Err())
		}
		return fmt.Errorf("receiver: key %q: %w", key, err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, inProgress(err)
		}
		owner := r.owner + "/" + nuid.Next()
		c := claim{digest: digest, owner: owner, fence: fence}
		rev, err := r.kv.Create(ctx, k, c.value())
		if err == nil {
			return r.run(ctx, key, k, rev, c, effect)
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, false, inProgress(err)
		}
		e, err := r.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // released or expired since Create: claim again
		}
		if err != nil {
			return nil, false, inProgress(err)
		}
		var rec record
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			return nil, false, fmt.Errorf("receiver: key %q holds an unreadable record (bucket %s, revision %d): %w", key, r.cfg.Bucket, e.Revision(), err)
		}
		if rec.Digest != digest && rec.State != stateReleased {
			return nil, false, fmt.Errorf("%w: key %q was first used with parameters of digest %.12s…, now %.12s…", ErrConflict, key, rec.Digest, digest)
		}
		c.fence = max(fence, rec.Fence)
		switch rec.State {
		case stateDone:
			return rec.Result, true, nil
		case stateRunning, stateReleased:
		default:
			return nil, false, fmt.Errorf("receiver: key %q has unknown state %q (bucket %s)", key, rec.State, r.cfg.Bucket)
		}
		if fence != 0 && fence < rec.Fence {
			return nil, false, fmt.Errorf("%w: key %q: this attempt's fence is %d, an attempt with fence %d was seen; its worker lost its lease, do not retry it", ErrStale, key, fence, rec.Fence)
		}
		if e.Revision() != seenRev {
			seenRev, seenAt = e.Revision(), r.now()
		}
		staleIn := r.cfg.Lease - r.now().Sub(seenAt)
		if rec.State == stateReleased || staleIn <= 0 {
			// Claim a released key, or take over a stale claim, at the
			// revision read: of several deliveries, one wins.
			rev, err := r.kv.Update(ctx, k, c.value(), e.Revision())
			if err == nil {
				return r.run(ctx, key, k, rev, c, effect)
			}
			if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
				continue
			}
			return nil, false, inProgress(err)
		}
		waiting = true
		if w == nil {
			// Watch from now on, then read again, so no change is missed.
			if w, err = r.kv.Watch(ctx, k, jetstream.UpdatesOnly()); err != nil {
				w = nil
				return nil, false, inProgress(err)
			}
			continue
		}
		t := time.NewTimer(staleIn)
		select {
		case _, ok := <-w.Updates():
			if !ok {
				w = nil // stopped (ctx ended or the connection closed): the loop decides
			}
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

func digestOf(params []byte) string {
	sum := sha256.Sum256(params)
	return hex.EncodeToString(sum[:])
}

// claim is one delivery's hold on a key.
type claim struct {
	digest, owner string
	fence         uint64 // the highest fence seen for the key, this attempt's included
}

// value is the claim's record as first written.
func (c claim) value() []byte {
	now := time.Now().UTC()
	data, _ := json.Marshal(record{State: stateRunning, Digest: c.digest, Owner: c.owner, ClaimedAt: now, RenewedAt: now, Fence: c.fence})
	return data
}

package receiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// run performs the effect under the claim at revision rev, renewing the
// claim while it runs, then records the result or releases the claim.
func (r *Receiver) run(ctx context.Context, key, k string, rev uint64, c claim, effect func(context.Context) (json.RawMessage, error)) (json.RawMessage, bool, error) {
	claimedAt := time.Now().UTC()
	hbCtx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		rev = r.renew(hbCtx, k, rev, c, claimedAt)
	}()
	stop := func() {
		stopHB()
		<-hbDone // rev is the heartbeat's from here on
	}

	var result json.RawMessage
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				stop()
				r.release(ctx, k, rev, c)
				panic(p)
			}
		}()
		result, err = effect(ctx)
	}()
	stop()
	if err != nil {
		r.release(ctx, k, rev, c)
		return nil, false, err
	}

	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	if result != nil && !json.Valid(result) {
		return result, false, fmt.Errorf("%w: key %q: the effect's result is not valid JSON", ErrNotRecorded, key)
	}
	data, _ := json.Marshal(record{State: stateDone, Digest: c.digest, Owner: c.owner, ClaimedAt: claimedAt, Result: result, DoneAt: time.Now().UTC(), Fence: c.fence})
	err = r.write(wctx, k, rev, c.owner, func(rev uint64) error {
		_, err := r.kv.Update(wctx, k, data, rev)
		return err
	})
	if err != nil {
		return result, false, fmt.Errorf("%w: key %q: %w", ErrNotRecorded, key, err)
	}
	return result, false, nil
}

// renew keeps the claim fresh every Lease/3 until ctx ends, and returns the
// claim's latest revision. It stops renewing if another delivery took the
// claim over.
func (r *Receiver) renew(ctx context.Context, k string, rev uint64, c claim, claimedAt time.Time) uint64 {
	every := max(r.cfg.Lease/3, time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return rev
		case <-t.C:
		}
		data, _ := json.Marshal(record{State: stateRunning, Digest: c.digest, Owner: c.owner, ClaimedAt: claimedAt, RenewedAt: time.Now().UTC(), Fence: c.fence})
		uctx, cancel := context.WithTimeout(ctx, every)
		next, err := r.kv.Update(uctx, k, data, rev)
		cancel()
		switch {
		case err == nil:
			rev = next
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			return rev // taken over; the final write finds out
		}
		// Other errors (a timeout, a reconnect) are retried on the next tick;
		// an ambiguous renewal is resolved by write, which re-reads the owner.
	}
}

// release frees the claim so that the next delivery runs the effect again:
// it deletes it, or, if the key has a fence, marks it released with the
// fence kept, so that an older attempt stays refused. If the write fails,
// the claim goes stale after Lease and is taken over then.
func (r *Receiver) release(ctx context.Context, k string, rev uint64, c claim) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	_ = r.write(wctx, k, rev, c.owner, func(rev uint64) error {
		if c.fence == 0 {
			return r.kv.Delete(wctx, k, jetstream.LastRevision(rev))
		}
		data, _ := json.Marshal(record{State: stateReleased, Digest: c.digest, Fence: c.fence})
		_, err := r.kv.Update(wctx, k, data, rev)
		return err
	})
}

// write applies op at the claim's revision. If the revision moved but the
// claim is still ours (a renewal committed although its reply was lost), it
// applies op once more at the current revision.
func (r *Receiver) write(ctx context.Context, k string, rev uint64, owner string, op func(rev uint64) error) error {
	err := op(rev)
	if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return err
	}
	e, gerr := r.kv.Get(ctx, k)
	if gerr != nil {
		return fmt.Errorf("%w (re-read: %w)", err, gerr)
	}
	var rec record
	if json.Unmarshal(e.Value(), &rec) != nil || rec.State != stateRunning || rec.Owner != owner {
		return fmt.Errorf("claim taken over by another delivery: %w", err)
	}
	return op(e.Revision())
}

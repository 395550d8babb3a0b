package shred

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/wire"
)

// Rotate makes a new key version for subject: values sealed from now on
// use it, older ones stay readable with theirs until the subject is
// forgotten. It returns the new version.
func (k *Keyring) Rotate(ctx context.Context, subject string) (int, error) {
	ref, _ := k.Ref(ctx, subject)
	v, err := k.latest(ctx, ref)
	if err != nil {
		return 0, err
	}
	if v == 0 {
		tomb, err := k.tombstone(ctx, ref)
		if err != nil {
			return 0, err
		}
		v = tomb.Through
	}
	key, err := k.create(ctx, ref, v+1)
	if err != nil {
		return 0, err
	}
	k.mu.Lock()
	k.keys[ref+"."+strconv.Itoa(v+1)] = key
	k.cur[ref] = v + 1
	k.mu.Unlock()
	return v + 1, nil
}

// Forget destroys every data key of subject: it records the tombstone
// (who asked, when, which key versions: the audit, durable in the bucket)
// first, then erases each key's message on disk (a secure delete, which
// overwrites the bytes in the block file). Run again after a failure, it
// finishes the job; a subject with no keys gets a tombstone all the same.
// A value written for the subject later is sealed under a new key.
func (k *Keyring) Forget(ctx context.Context, subject, by string) (Tombstone, error) {
	ref, _ := k.Ref(ctx, subject)
	versions, err := k.versions(ctx, ref)
	if err != nil {
		return Tombstone{}, fmt.Errorf("forget %s: list keys: %w", ref, err)
	}
	prev, err := k.tombstone(ctx, ref)
	if err != nil {
		return Tombstone{}, err
	}
	t := Tombstone{Ref: ref, At: time.Now().UTC(), By: by, Through: prev.Through}
	for _, v := range versions {
		t.Through = max(t.Through, v.v)
	}
	if prev.Ref == "" || t.Through > prev.Through || len(versions) > 0 {
		data, _ := json.Marshal(t)
		if _, err := k.kv.Put(ctx, wire.TombstoneKey(ref), data); err != nil {
			return Tombstone{}, fmt.Errorf("forget %s: tombstone: %w", ref, err)
		}
	} else {
		t = prev // nothing new to destroy: the first forget's record stands
	}
	k.drop(ref)
	for _, v := range versions {
		if err := k.stream.SecureDeleteMsg(ctx, v.rev); err != nil && !isGone(err) {
			return t, fmt.Errorf("forget %s: erase key v%d: %w", ref, v.v, err)
		}
		t.Erased++
	}
	k.drop(ref)
	if k.OnForget != nil {
		k.OnForget(ref)
	}
	return t, nil
}

func isGone(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeMessageNotFound
}

// Run watches the keys bucket until ctx ends and drops what this node
// cached of a subject another node rotated or forgot. A watch that ends or
// cannot start while ctx lives (the connection lost its consumer) is
// started again after a pause, and everything cached is dropped first: a
// forget may have come in the gap, and a key kept past it would open the
// person's data here.
func (k *Keyring) Run(ctx context.Context) error {
	for {
		err := k.watch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		k.dropAll()
		slog.Default().Warn("keys bucket watch ended; dropped every cached data key and watching again", "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// watch follows the keys bucket until ctx ends or the watch does.
func (k *Keyring) watch(ctx context.Context) error {
	w, err := k.kv.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		return fmt.Errorf("watch keys bucket: %w", err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("the watch's updates ended")
			}
			if e == nil {
				continue
			}
			ref := wire.RefOfKey(e.Key())
			if ref == "" {
				continue
			}
			k.drop(ref)
			if e.Key() == wire.TombstoneKey(ref) && k.OnForget != nil {
				k.OnForget(ref)
			}
		}
	}
}

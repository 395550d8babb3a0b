package shred

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Lazy is a node's keyring, opened on first use: a namespace whose types
// mark nothing personal never gets a keys bucket. Writing (and forgetting)
// creates the bucket when missing; reading never does — a sealed value
// read where the bucket is gone is [ErrNoBucket], not an erased value.
type Lazy struct {
	JS        jetstream.JetStream
	Namespace string
	Replicas  int
	// OnForget is called when this node learns that a subject was
	// forgotten (see [Keyring.OnForget]).
	OnForget func(ref string)
	// Watch is the context the keyring's watch runs in (the node's
	// lifetime); nil: no watch.
	Watch context.Context

	mu   sync.Mutex
	ring *Keyring
	done chan struct{}
}

var _ Keys = (*Lazy)(nil)

// Keyring returns the keyring, opening it (creating the bucket if create)
// on first use.
func (l *Lazy) Keyring(ctx context.Context, create bool) (*Keyring, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ring != nil {
		return l.ring, nil
	}
	k, err := open(ctx, l.JS, l.Namespace, l.Replicas, create)
	if err != nil {
		return nil, err
	}
	k.OnForget = l.OnForget
	l.ring = k
	if l.Watch != nil {
		l.done = make(chan struct{})
		go func() {
			defer close(l.done)
			_ = k.Run(l.Watch)
		}()
	}
	return k, nil
}

// Wait returns after the keyring's watch (if one started) has stopped;
// cancel the Watch context first.
func (l *Lazy) Wait() {
	l.mu.Lock()
	done := l.done
	l.mu.Unlock()
	if done != nil {
		<-done
	}
}

// Ref implements [Keys] (creating the bucket when missing).
func (l *Lazy) Ref(ctx context.Context, subject string) (string, error) {
	k, err := l.Keyring(ctx, true)
	if err != nil {
		return "", err
	}
	return k.Ref(ctx, subject)
}

// Current implements [Keys] (creating the bucket when missing).
func (l *Lazy) Current(ctx context.Context, ref string) (int, []byte, error) {
	k, err := l.Keyring(ctx, true)
	if err != nil {
		return 0, nil, err
	}
	return k.Current(ctx, ref)
}

// Key implements [Keys]; it never creates the bucket.
func (l *Lazy) Key(ctx context.Context, ref string, v int) ([]byte, error) {
	k, err := l.Keyring(ctx, false)
	if err != nil {
		return nil, err
	}
	return k.Key(ctx, ref, v)
}

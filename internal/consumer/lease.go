package consumer

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// errLeaseLost cancels a handler whose worker can no longer vouch for its
// lease: the command may be with another worker now.
var errLeaseLost = errors.New("the lease on the command may have passed to another worker")

// lease is a worker's own account of its hold on one delivery, on this
// process's monotonic clock, which keeps running while the process is
// stopped (SIGSTOP, a long GC pause). It does not run while the whole host
// is suspended (Linux CLOCK_MONOTONIC leaves suspend out): a worker woken
// from that may still call, and the fence is what refuses it.
//
// The server cannot vouch for a holder (nats-server 2.15, consumer.go):
// an in-progress ack ("+WPI") is matched by stream sequence only
// (progressUpdate ignores the delivery sequence and count), so a stale
// worker's "+WPI" extends the lease of whoever holds the message now, and
// its reply (sendAckReply) is the same empty message either way. What the
// worker can know is a lower bound of the moment the server last started
// its AckWait: the delivery happened after the fetch was sent, and a
// confirmed "+WPI" was processed after it was sent. While now is less than
// that bound plus AckWait (less a margin for the call to reach its target),
// no other worker can have been given the command.
type lease struct {
	ackWait, margin time.Duration
	now             func() time.Time // time.Now; a test's clock can jump past a pause

	mu    sync.Mutex
	start time.Time // lower bound of the server's last (re)start of AckWait
}

func newLease(start time.Time, ackWait time.Duration, now func() time.Time) *lease {
	return &lease{ackWait: ackWait, margin: ackWait / 10, start: start, now: now}
}

// left is how long the lease is sure to hold from now; ≤ 0 means it may be
// gone.
func (l *lease) left() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.start.Add(l.ackWait - l.margin).Sub(l.now())
}

// age is the time since the lease's start was last confirmed.
func (l *lease) age() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.now().Sub(l.start)
}

// renew sends an in-progress ack and waits for the server's reply. It
// returns false if the lease may have run out before the server processed
// it (then the "+WPI" may have extended another worker's lease, not ours).
func (l *lease) renew(ctx context.Context, nc *nats.Conn, m jetstream.Msg) bool {
	left := l.left()
	if left <= 0 {
		return false
	}
	sent := l.now()
	rctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	if _, err := nc.RequestWithContext(rctx, m.Reply(), []byte("+WPI")); err != nil {
		return l.left() > 0 // not confirmed: the old bound stands
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.now().After(l.start.Add(l.ackWait - l.margin)) {
		return false
	}
	l.start = sent
	return true
}

// confirm makes sure the lease holds before a call: false if a pause ate
// it; otherwise, if less than half of it is left, it is renewed first, so
// the call starts with most of a lease.
func (l *lease) confirm(ctx context.Context, nc *nats.Conn, m jetstream.Msg) bool {
	left := l.left()
	switch {
	case left <= 0:
		return false
	case left > l.ackWait/2:
		return true
	default:
		return l.renew(ctx, nc, m)
	}
}

// keep renews the lease every AckWait/3 until ctx ends; when it can no
// longer vouch for the lease it calls lost and returns.
func (l *lease) keep(ctx context.Context, nc *nats.Conn, m jetstream.Msg, lost func()) {
	t := time.NewTicker(max(l.ackWait/3, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !l.renew(ctx, nc, m) && ctx.Err() == nil {
			lost()
			return
		}
	}
}

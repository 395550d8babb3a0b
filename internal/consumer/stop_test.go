package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// A worker stopped while its target is unavailable does not hold the
// node's shutdown for the rest of the attempt's timeout (the node's grace
// is shorter, and it exits 1 when that runs out): it stops calling, hands
// the command back at once, and Run returns. Another worker then applies
// it, without waiting for the first one's AckWait.
func TestStopWhileTargetUnavailable(t *testing.T) {
	e := newWEnv(t, natstest.RunServer(t))
	called := make(chan struct{}, 1)
	down := HandlerFunc(func(context.Context, Delivery) (json.RawMessage, error) {
		select {
		case called <- struct{}{}:
		default:
		}
		return nil, Unavailable(errors.New("no service answers"))
	})
	kc := fast("lock", down)
	kc.Timeout = time.Minute
	kc.AckWait = 30 * time.Second // a hand-back must not wait for it
	w, err := NewWorker(t.Context(), e.js, e.ns, kc, e.fb, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	id := e.command(t, "lock", "s1", `{}`)
	select {
	case <-called:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler was never called")
	}
	stop()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run still waiting 20s after its stop: the unavailable target holds the shutdown for the attempt's whole timeout")
	}

	up := fast("lock", HandlerFunc(func(context.Context, Delivery) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }))
	up.AckWait = 30 * time.Second
	e.start(t, up)
	natstest.Eventually(t, 15*time.Second, func() bool {
		rc, ok := e.receipt(t, id)
		return ok && rc.Outcome == wire.OutcomeDone
	})
}

// heldWrites dials connections whose writes the test can hold: what the
// client sends (an unsubscribe, an ack) waits, what the server sends still
// arrives. It widens the moment between a client walking away from a
// subscription and the server hearing of it, as a route, a leaf link or a
// busy connection does.
type heldWrites struct{ mu sync.RWMutex } // write-locked while held

func (h *heldWrites) Dial(network, address string) (net.Conn, error) {
	c, err := net.Dial(network, address)
	if err != nil {
		return nil, err
	}
	return heldConn{c, h}, nil
}

func (h *heldWrites) hold()    { h.mu.Lock() }
func (h *heldWrites) release() { h.mu.Unlock() }

type heldConn struct {
	net.Conn
	h *heldWrites
}

func (c heldConn) Write(p []byte) (int, error) {
	c.h.mu.RLock()
	defer c.h.mu.RUnlock()
	return c.Conn.Write(p)
}

// A command that lands while a stopping worker's idle pull is open on the
// server, or just after its Run returned, is not lost in the stop. A pull
// request is open on the server until it expires or the server hears that
// its reply subject has no subscriber; a message the server sends it
// before then, to a client that no longer reads that pull, is dropped by
// the client, unacked, and the next worker got it only after AckWait
// (30s). The relay stops after the workers, so a command published just
// after them is the common case. The restarted worker must have it done
// within a few idle waits (2s each).
func TestACommandArrivingAsTheWorkerStopsIsNotLostForAckWait(t *testing.T) {
	s := natstest.RunServer(t)
	for _, tc := range []struct {
		name      string
		afterStop bool // publish once Run has returned, not as the stop begins
	}{{"as the stop begins", false}, {"after Run returned", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newWEnv(t, s)
			var h heldWrites
			nc, err := nats.Connect(s.ClientURL(), nats.SetCustomDialer(&h))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			ok := HandlerFunc(func(context.Context, Delivery) (json.RawMessage, error) { return json.RawMessage(`{}`), nil })
			kc := fast("lock", ok)
			kc.AckWait = 30 * time.Second // what the command waits for if dropped
			w, err := NewWorker(t.Context(), js, e.ns, kc, e.fb, nil)
			if err != nil {
				t.Fatal(err)
			}
			cons, err := e.js.Consumer(t.Context(), streams.NamesFor(e.ns).Outbox, wire.WorkerConsumerName("lock"))
			if err != nil {
				t.Fatal(err)
			}
			info := func() *jetstream.ConsumerInfo {
				i, err := cons.Info(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				return i
			}
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			done := make(chan struct{})
			go func() { _ = w.Run(ctx); close(done) }()
			natstest.Eventually(t, 10*time.Second, func() bool { return info().NumWaiting > 0 }) // idle, its pull open
			h.hold()
			released := sync.OnceFunc(h.release)
			defer released()
			stop()
			if tc.afterStop {
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatal("Run still waiting 10s after its stop with nothing to do")
				}
			}
			id := e.command(t, "lock", "s1", `{}`)
			// The server delivers it to an open pull, or keeps it when none is.
			natstest.Eventually(t, 10*time.Second, func() bool {
				i := info()
				return i.NumAckPending == 1 || i.NumPending == 1 && i.NumWaiting == 0
			})
			released()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Run still waiting 10s after its stop")
			}
			began := time.Now()
			e.start(t, kc)
			natstest.Eventually(t, 8*time.Second, func() bool {
				rc, ok := e.receipt(t, id)
				return ok && rc.Outcome == wire.OutcomeDone
			})
			t.Logf("done %s after the restart (by the stopped worker: %d)", time.Since(began).Round(time.Millisecond), w.Stats().Done)
		})
	}
}

// A command handed back unrun because its worker was stopping — here while
// its target was unavailable; also while it waited for its rate limit, its
// concurrency key or a readable receipt — costs no attempt: stopped more
// times than the kind's attempts, it is neither dead-lettered nor run at a
// late attempt; the worker that finally runs it calls it attempt 1, and the
// hand-back record is gone once it is done.
func TestStopsWhileACommandWaitsCostItNoAttempts(t *testing.T) {
	s := natstest.RunServer(t)
	e := newWEnv(t, s)
	ctl, err := OpenControl(t.Context(), e.js, e.ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Stop()
	id := e.command(t, "lock", "s2", `{}`)
	called := make(chan Delivery, 1)
	down := HandlerFunc(func(_ context.Context, d Delivery) (json.RawMessage, error) {
		select {
		case called <- d:
		default:
		}
		return nil, Unavailable(errors.New("no service answers"))
	})
	const stops = 4
	for i := range stops {
		kc := fast("lock", down)
		kc.MaxAttempts, kc.Timeout, kc.AckWait, kc.Control = 2, time.Minute, 30*time.Second, ctl
		w, err := NewWorker(t.Context(), e.js, e.ns, kc, e.fb, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		select {
		case d := <-called:
			if d.Attempt != 1 {
				t.Fatalf("stop %d: the call's attempt is %d, want 1 (handed back %d)", i, d.Attempt, d.HandedBack)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("stop %d: the handler was never called", i)
		}
		stop()
		<-done
	}
	if n := e.deadLetters(t); n != 0 {
		t.Fatalf("%d dead letters after %d stops, want none", n, stops)
	}
	var got atomic.Pointer[Delivery]
	up := fast("lock", HandlerFunc(func(_ context.Context, d Delivery) (json.RawMessage, error) {
		got.Store(&d)
		return json.RawMessage(`{}`), nil
	}))
	up.MaxAttempts, up.AckWait, up.Control = 2, 30*time.Second, ctl
	e.start(t, up)
	natstest.Eventually(t, 15*time.Second, func() bool {
		rc, ok := e.receipt(t, id)
		return ok && rc.Outcome == wire.OutcomeDone
	})
	// At least one hand-back a stop: a stopping worker's idle pull runs
	// out (up to 2s), so the nak's redelivery may reach it and be handed
	// back again.
	if d := got.Load(); d == nil || d.Attempt != 1 || d.HandedBack < stops {
		t.Fatalf("the delivery that ran: %+v; want attempt 1, handed back at least %d times", d, stops)
	}
	if rc, _ := e.receipt(t, id); rc.Attempts != 1 {
		t.Errorf("receipt attempts %d, want 1", rc.Attempts)
	}
	kv, err := e.js.KeyValue(t.Context(), streams.NamesFor(e.ns).Workers)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		_, err := kv.Get(t.Context(), wire.HandBackKey("lock", id))
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
}

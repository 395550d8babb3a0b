package consumer

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// gatedFeedback holds every report until the gate opens.
type gatedFeedback struct {
	gate    chan struct{}
	waiting atomic.Int64
	rec     recorder
}

func (f *gatedFeedback) Report(ctx context.Context, r wire.Report) error {
	f.waiting.Add(1)
	defer f.waiting.Add(-1)
	select {
	case <-f.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return f.rec.Report(ctx, r)
}

// gatedRun is a worker of kind ship with a pool of pool whose reports wait
// for open; it counts the calls and the most that ran at once.
type gatedRun struct {
	w                    *Worker
	fb                   *gatedFeedback
	calls, running, most atomic.Int64
	open                 func()
	stop                 func() error
}

func startGated(t *testing.T, e *wEnv, pool int) *gatedRun {
	t.Helper()
	g := &gatedRun{fb: &gatedFeedback{gate: make(chan struct{})}}
	kc := fast("ship", HandlerFunc(func(ctx context.Context, d Delivery) (json.RawMessage, error) {
		n := g.running.Add(1)
		defer g.running.Add(-1)
		for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
		}
		g.calls.Add(1)
		return json.RawMessage(`{"shipped":"` + d.AggregateID + `"}`), nil
	}))
	kc.Workers = pool
	w, err := NewWorker(t.Context(), e.js, e.ns, kc, g.fb, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.w = w
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	g.open = sync.OnceFunc(func() { close(g.fb.gate) })
	g.stop = sync.OnceValue(func() error { g.open(); cancel(); return <-done })
	t.Cleanup(func() { _ = g.stop() })
	return g
}

// A call that is over gives its place in the pool back before its records
// are written: with a pool of two, four commands are called while the
// reports of all four still wait (as receipts wait for their group commit
// round), and the pool still bounds how many calls run at once.
func TestTheNextCallDoesNotWaitForTheLastOnesRecords(t *testing.T) {
	s := natstest.RunServer(t)
	e := newWEnv(t, s)
	g := startGated(t, e, 2)
	aggs := []string{"s1", "s2", "s3", "s4"}
	var ids []string
	for _, a := range aggs {
		ids = append(ids, e.command(t, "ship", a, `{}`))
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return g.calls.Load() == 4 && g.fb.waiting.Load() == 4 })
	if g.w.Stats().Done != 0 {
		t.Fatalf("done %d before any report was recorded", g.w.Stats().Done)
	}
	g.open()
	natstest.Eventually(t, 10*time.Second, func() bool { return g.w.Stats().Done == 4 })
	if g.most.Load() > 2 {
		t.Fatalf("%d calls ran at once with a pool of 2", g.most.Load())
	}
	for i, id := range ids {
		rc, ok := e.receipt(t, id)
		if !ok || rc.Outcome != wire.OutcomeDone || string(rc.Result) != `{"shipped":"`+aggs[i]+`"}` {
			t.Fatalf("receipt of %s: %+v %v", id, rc, ok)
		}
	}
	if got := len(g.fb.rec.all()); got != 4 {
		t.Fatalf("%d reports recorded, want 4", got)
	}
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
}

// A pool of one runs its commands one after another end to end: the next
// call waits for the last one's report.
func TestAPoolOfOneWaitsForTheLastOnesRecords(t *testing.T) {
	s := natstest.RunServer(t)
	e := newWEnv(t, s)
	g := startGated(t, e, 1)
	e.command(t, "ship", "o1", `{}`)
	natstest.Eventually(t, 10*time.Second, func() bool { return g.fb.waiting.Load() == 1 })
	// The pool's only place is still the first command's: nobody pulls,
	// and the second command stays in OUTBOX (a freed place would be
	// waiting in a pull and take it as it lands).
	e.command(t, "ship", "o2", `{}`)
	cons, err := e.js.Consumer(t.Context(), streams.NamesFor(e.ns).Outbox, wire.WorkerConsumerName("ship"))
	if err != nil {
		t.Fatal(err)
	}
	var info *jetstream.ConsumerInfo
	natstest.Eventually(t, 10*time.Second, func() bool {
		info, err = cons.Info(t.Context())
		return err == nil && info.NumPending+uint64(info.NumAckPending) == 2
	})
	if info.NumPending != 1 || info.NumWaiting != 0 || g.calls.Load() != 1 {
		t.Fatalf("while the first report waits: %d pending, %d pulls waiting, %d calls; want 1, 0, 1",
			info.NumPending, info.NumWaiting, g.calls.Load())
	}
	g.open()
	natstest.Eventually(t, 10*time.Second, func() bool { return g.w.Stats().Done == 2 })
	if err := g.stop(); err != nil {
		t.Fatal(err)
	}
}

package consumer

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/wire"
)

// gatedFeedback holds every report until the gate opens.
type gatedFeedback struct {
	gate    chan struct{}
	waiting atomic.Int64
	rec     recorder
}

func (f *gatedFeedback) Report(ctx context.Context, r Report) error {
	f.waiting.Add(1)
	defer f.waiting.Add(-1)
	select {
	case <-f.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return f.rec.Report(ctx, r)
}

// A call that is over gives its place in the pool back before its records
// are written: with a pool of one, the next command is called while the
// first one's report still waits (as a receipt waits for its group commit
// round), and the pool still bounds how many calls run at once.
func TestTheNextCallDoesNotWaitForTheLastOnesRecords(t *testing.T) {
	s := natstest.RunServer(t)
	e := newWEnv(t, s)
	fb := &gatedFeedback{gate: make(chan struct{})}
	var calls, running, most atomic.Int64
	kc := fast("ship", HandlerFunc(func(ctx context.Context, d Delivery) (json.RawMessage, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		calls.Add(1)
		return json.RawMessage(`{"shipped":"` + d.AggregateID + `"}`), nil
	}))
	kc.Workers = 1
	w, err := NewWorker(t.Context(), e.js, e.ns, kc, fb, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	open := sync.OnceFunc(func() { close(fb.gate) })
	stop := sync.OnceValue(func() error { open(); cancel(); return <-done })
	t.Cleanup(func() { _ = stop() })

	aggs := []string{"s1", "s2", "s3"}
	var ids []string
	for _, a := range aggs {
		ids = append(ids, e.command(t, "ship", a, `{}`))
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return calls.Load() == 3 && fb.waiting.Load() == 3 })
	if w.Stats().Done != 0 {
		t.Fatalf("done %d before any report was recorded", w.Stats().Done)
	}
	open()
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Done == 3 })
	if most.Load() != 1 {
		t.Fatalf("%d calls ran at once with a pool of 1", most.Load())
	}
	for i, id := range ids {
		rc, ok := e.receipt(t, id)
		if !ok || rc.Outcome != wire.OutcomeDone || string(rc.Result) != `{"shipped":"`+aggs[i]+`"}` {
			t.Fatalf("receipt of %s: %+v %v", id, rc, ok)
		}
	}
	if got := len(fb.rec.all()); got != 3 {
		t.Fatalf("%d reports recorded, want 3", got)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

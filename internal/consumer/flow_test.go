package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// callLog is a target that records every call: when, and which command.
type callLog struct {
	mu    sync.Mutex
	at    []time.Time
	calls map[string]int
}

func (c *callLog) handler() Handler {
	return HandlerFunc(func(_ context.Context, d Delivery) (json.RawMessage, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.calls == nil {
			c.calls = map[string]int{}
		}
		c.at = append(c.at, time.Now())
		c.calls[d.CommandID]++
		return nil, nil
	})
}

func (c *callLog) snapshot() ([]time.Time, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.at), func() map[string]int {
		m := map[string]int{}
		for k, v := range c.calls {
			m[k] = v
		}
		return m
	}()
}

// node is one node's worker for kind: its own connection and its own
// Control, as a node has.
func (e *wEnv) node(t *testing.T, s *server.Server, kc KindConfig) (*Worker, *Control) {
	t.Helper()
	_, js := natstest.Connect(t, s)
	ctl, err := OpenControl(t.Context(), js, e.ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	kc.Control = ctl
	w, err := NewWorker(t.Context(), js, e.ns, kc, e.fb, nil)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(context.Background())
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	t.Cleanup(func() { wcancel(); <-wdone })
	return w, ctl
}

func TestAPausedKindPullsNothingAndResumesWhereItStopped(t *testing.T) {
	s := natstest.RunServer(t)
	e := newWEnv(t, s)
	var target callLog
	kc := fast("pay", target.handler())
	kc.Workers = 4
	w1, ctl := e.node(t, s, kc)
	w2, _ := e.node(t, s, kc)
	for i := range 10 {
		e.command(t, "pay", fmt.Sprintf("a%d", i), `{}`)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return w1.Stats().Done+w2.Stats().Done == 10 })

	if _, err := ctl.SetPaused(t.Context(), "pay", true, "oncall", "provider incident"); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.SetPaused(t.Context(), "pay", true, "other", ""); !errors.Is(err, ErrAlreadyPaused) {
		t.Fatalf("a second pause: %v, want ErrAlreadyPaused", err)
	}
	// Each node stops pulling once its pull in flight (if any) returns.
	natstest.Eventually(t, 10*time.Second, func() bool { return w1.Stats().Paused && w2.Stats().Paused })
	cons, err := e.js.Consumer(t.Context(), streams.NamesFor(e.ns).Outbox, "esjet-worker-pay")
	if err != nil {
		t.Fatal(err)
	}
	before, err := cons.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		e.command(t, "pay", fmt.Sprintf("b%d", i), `{}`)
	}
	// The server counts a consumer's pending messages as it is signalled
	// of new ones: poll for the 30, and check nothing was delivered.
	var info *jetstream.ConsumerInfo
	natstest.Eventually(t, 10*time.Second, func() bool {
		info, err = cons.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return info.NumPending == 30 || info.NumAckPending != 0 || info.Delivered.Consumer != before.Delivered.Consumer
	})
	if info.NumPending != 30 || info.NumAckPending != 0 || info.Delivered.Consumer != before.Delivered.Consumer {
		t.Fatalf("while paused: %d pending, %d delivered and not acked, %d delivered in all; want 30, 0 and %d (nothing pulled)", info.NumPending, info.NumAckPending, info.Delivered.Consumer, before.Delivered.Consumer)
	}
	sts, err := ctl.Statuses(t.Context(), e.js, e.ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != 1 || !sts[0].Paused || sts[0].By != "oncall" || sts[0].Reason != "provider incident" || sts[0].Backlog != 30 || sts[0].Oldest.IsZero() {
		t.Fatalf("status while paused: %+v", sts)
	}

	if _, err := ctl.SetPaused(t.Context(), "pay", false, "oncall", "fixed"); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.SetPaused(t.Context(), "pay", false, "oncall", ""); !errors.Is(err, ErrNotPaused) {
		t.Fatalf("a second resume: %v, want ErrNotPaused", err)
	}
	natstest.Eventually(t, 20*time.Second, func() bool { return w1.Stats().Done+w2.Stats().Done == 40 })
	_, calls := target.snapshot()
	for i := range 30 {
		id := fmt.Sprintf("trip:b%d:1:0", i)
		if calls[id] != 1 {
			t.Errorf("%s called %d times, want once", id, calls[id])
		}
		if rc, ok := e.receipt(t, id); !ok || rc.Attempts != 1 {
			t.Errorf("%s: receipt %+v, want done after 1 attempt (a pause counts none)", id, rc)
		}
	}
}

func TestARateLimitHoldsAcrossNodes(t *testing.T) {
	s := natstest.RunServer(t)
	e := newWEnv(t, s)
	const rate, burst, n = 50, 5, 150
	var target callLog
	var ws []*Worker
	for range 3 {
		kc := fast("charge", target.handler())
		kc.Workers, kc.Rate, kc.Burst, kc.AckWait = 8, rate, burst, 15*time.Second // a lease that outlasts a busy -race machine's stalls: a lapsed one is a redelivery, an attempt
		w, _ := e.node(t, s, kc)
		ws = append(ws, w)
	}
	for i := range n {
		e.command(t, "charge", fmt.Sprintf("c%d", i), `{}`)
	}
	done := func() int64 {
		var d int64
		for _, w := range ws {
			d += w.Stats().Done
		}
		return d
	}
	natstest.Eventually(t, 60*time.Second, func() bool { return done() == n })
	at, calls := target.snapshot()
	if len(calls) != n || len(at) != n {
		t.Fatalf("%d calls of %d commands, want %d of %d", len(at), len(calls), n, n)
	}
	// Over any 1 s window the calls started are at most burst + rate, the
	// token bucket's bound; the slack is 100 ms of a call starting late
	// after its token (a busy machine's scheduling), rate/10 calls.
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i := range at {
		j, _ := slices.BinarySearchFunc(at, at[i].Add(time.Second), func(x, t time.Time) int { return x.Compare(t) })
		most = max(most, j-i)
	}
	if limit := rate + burst + rate/10; most > limit {
		t.Fatalf("%d calls within one second across 3 nodes; the limit is %d/s with a burst of %d (at most %d with slack)", most, rate, burst, limit)
	}
	var waits int64
	for _, w := range ws {
		waits += w.Stats().RateWaits
	}
	if waits == 0 {
		t.Fatal("no delivery waited for the rate limit")
	}
	t.Logf("at most %d calls in any second; %d deliveries waited for their token; %s for %d calls", most, waits, at[len(at)-1].Sub(at[0]).Round(time.Millisecond), n)
	for id, c := range calls {
		if c != 1 {
			t.Errorf("%s called %d times", id, c)
		}
		if rc, ok := e.receipt(t, id); !ok || rc.Attempts != 1 {
			t.Errorf("%s: receipt %+v, want done after 1 attempt (waiting counts none)", id, rc)
		}
	}
}

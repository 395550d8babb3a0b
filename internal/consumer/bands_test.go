package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

func (e *wEnv) outbox() string { return streams.NamesFor(e.ns).Outbox }

// commandAt publishes a command of band priority to OUTBOX as the relay
// does, with fence base base (a re-drive's) when it is not 0.
func (e *wEnv) commandAt(t *testing.T, kind, id, priority string, base uint64) string {
	t.Helper()
	cmdID := fmt.Sprintf("trip:%s:1:0", id)
	m := nats.NewMsg(wire.BandSubject(e.ns, kind, priority))
	m.Data = []byte(`{}`)
	for k, v := range map[string]string{
		jetstream.MsgIDHeader: cmdID, wire.HeaderCommandID: cmdID, wire.HeaderCommandKind: kind,
		wire.HeaderAggregateType: "trip", wire.HeaderAggregateID: id, wire.HeaderVersion: "1", wire.HeaderDecisionID: "d-" + id,
	} {
		m.Header.Set(k, v)
	}
	if priority != "" {
		m.Header.Set(wire.HeaderPriority, priority)
	}
	if base > 0 {
		m.Header.Set(wire.HeaderFenceBase, strconv.FormatUint(base, 10))
	}
	if _, err := e.js.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	return cmdID
}

// order is a target that records the order in which calls finish, with
// each call's priority and fence.
type order struct {
	mu     sync.Mutex
	done   []Delivery
	called map[string]int
}

func (o *order) handler(work time.Duration) Handler {
	return HandlerFunc(func(ctx context.Context, d Delivery) (json.RawMessage, error) {
		select {
		case <-time.After(work):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.called == nil {
			o.called = map[string]int{}
		}
		o.called[d.CommandID]++
		o.done = append(o.done, d)
		return nil, nil
	})
}

func TestHighPriorityCommandsOvertakeALowBacklogWithoutStarvingIt(t *testing.T) {
	s := natstest.RunServer(t)
	e := newWEnv(t, s)
	var target order
	kc := fast("ship", target.handler(10*time.Millisecond))
	kc.Workers, kc.AckWait = 4, 5*time.Second
	w, ctl := e.node(t, s, kc)
	const lows, highs = 200, 10
	for i := range lows {
		e.commandAt(t, "ship", fmt.Sprintf("low%d", i), wire.PriorityLow, 0)
	}
	natstest.Eventually(t, 30*time.Second, func() bool { return w.Stats().Done >= 10 })
	// The high ones arrive while the low backlog is being worked off; the
	// pause only makes them arrive together (a pause leaves the backlog as
	// it is: nothing pulled, nothing counted).
	if _, err := ctl.SetPaused(t.Context(), "ship", true, "test", ""); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Paused })
	// and the low ones in flight finish.
	low, err := e.js.Consumer(t.Context(), e.outbox(), wire.BandConsumerName("ship", wire.PriorityLow))
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		info, err := low.Info(t.Context())
		return err == nil && info.NumAckPending == 0
	})
	target.mu.Lock()
	before := len(target.done)
	target.mu.Unlock()
	for i := range highs {
		e.commandAt(t, "ship", fmt.Sprintf("high%d", i), wire.PriorityHigh, 0)
	}
	// The status counts every band of the kind.
	natstest.Eventually(t, 10*time.Second, func() bool {
		sts, err := ctl.Statuses(t.Context(), e.js, e.ns, nil)
		return err == nil && len(sts) == 1 && sts[0].Backlog == uint64(lows-before+highs) && !sts[0].Oldest.IsZero()
	})
	if _, err := ctl.SetPaused(t.Context(), "ship", false, "test", ""); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 60*time.Second, func() bool { return w.Stats().Done == lows+highs })

	target.mu.Lock()
	defer target.mu.Unlock()
	lowsFirst, highsSeen := 0, 0
	for _, d := range target.done[before:] {
		if highsSeen == highs {
			break
		}
		switch d.Priority {
		case wire.PriorityHigh:
			highsSeen++
		case wire.PriorityLow:
			lowsFirst++
		default:
			t.Fatalf("%s has priority %q", d.CommandID, d.Priority)
		}
	}
	// Of every 5 pulls while both bands wait, 4 are high: the 10 high ones
	// are pulled within the first ~13, beside 4 in flight.
	if lowsFirst > highs {
		t.Errorf("%d low commands finished before the last of %d high ones (with %d low waiting); want high first", lowsFirst, highs, lows-before)
	}
	if lowsFirst == 0 {
		t.Errorf("no low command ran while high ones waited: the low band starved")
	}
	for i := range lows {
		if id := fmt.Sprintf("trip:low%d:1:0", i); target.called[id] != 1 {
			t.Errorf("%s called %d times, want once", id, target.called[id])
		}
	}
	t.Logf("after the high ones arrived, %d low commands finished before the last of the %d high ones; all %d low ran", lowsFirst, highs, lows)
}

func TestTheBandsShareThePullsFourTwoOne(t *testing.T) {
	w := &Worker{}
	for _, p := range wire.Priorities {
		w.bands = append(w.bands, &band{priority: p, weight: bandWeights[p]})
	}
	now := time.Now()
	q := w.split(70, now)
	if q[0] != 40 || q[1] != 20 || q[2] != 10 {
		t.Fatalf("70 pulls over high, normal, low: %v, want 40 20 10", q)
	}
	w.bands[1].emptyUntil = now.Add(time.Second) // normal found empty
	q = w.split(50, now)
	if q[0] != 40 || q[1] != 0 || q[2] != 10 {
		t.Fatalf("50 pulls over high and low: %v, want 40 0 10", q)
	}
	// One pull at a time interleaves: low gets its turn within every 5.
	var seq []int
	for range 10 {
		q := w.split(1, now)
		for i, n := range q {
			if n == 1 {
				seq = append(seq, i)
			}
		}
	}
	lowAt := -1
	for i, b := range seq {
		if b == 2 {
			if lowAt >= 0 && i-lowAt > 5 {
				t.Fatalf("pulls %v: low waited %d pulls", seq, i-lowAt)
			}
			lowAt = i
		}
	}
	if lowAt < 0 {
		t.Fatalf("pulls %v: low never pulled", seq)
	}
}

// A command re-driven into another band's consumer is delivered with a
// fence above its base (the fence it died with), not that consumer's own
// low sequence.
func TestAFenceBaseLiftsABandsFence(t *testing.T) {
	s := natstest.RunServer(t)
	e := newWEnv(t, s)
	var target order
	e.start(t, fast("refund", target.handler(0)))
	e.commandAt(t, "refund", "r1", wire.PriorityLow, 5000)
	natstest.Eventually(t, 10*time.Second, func() bool {
		target.mu.Lock()
		defer target.mu.Unlock()
		return len(target.done) == 1
	})
	target.mu.Lock()
	defer target.mu.Unlock()
	if d := target.done[0]; d.Fence <= 5000 || d.Priority != wire.PriorityLow {
		t.Fatalf("re-driven low command delivered with fence %d priority %q; want above 5000, low", d.Fence, d.Priority)
	}
}

// While a low backlog keeps the pool busy, a node keeps a place waiting on
// the normal band (a pull at the server), so live commands start as they
// arrive instead of queueing behind the re-drive; and none on the high
// band, which had no command.
func TestABusyLowBandLeavesAPlaceWaitingForLiveCommands(t *testing.T) {
	s := natstest.RunServer(t)
	e := newWEnv(t, s)
	var target order
	kc := fast("pay", target.handler(5*time.Millisecond))
	kc.Workers, kc.AckWait = 4, 5*time.Second
	const lows = 1000
	for i := range lows {
		e.commandAt(t, "pay", fmt.Sprintf("low%d", i), wire.PriorityLow, 0)
	}
	e.node(t, s, kc)
	cons := func(p string) jetstream.Consumer {
		c, err := e.js.Consumer(t.Context(), e.outbox(), wire.BandConsumerName("pay", p))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	normal, high, low := cons(wire.PriorityNormal), cons(wire.PriorityHigh), cons(wire.PriorityLow)
	info := func(c jetstream.Consumer) *jetstream.ConsumerInfo {
		i, err := c.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		return info(normal).NumWaiting == 1 && info(low).NumAckPending > 0
	})
	// No high command ever came: no place waits for one.
	if hi := info(high); hi.NumWaiting != 0 {
		t.Errorf("%d pulls wait on the high band, which never had a command; want none", hi.NumWaiting)
	}
	for i := range 10 {
		id := e.commandAt(t, "pay", fmt.Sprintf("live%d", i), wire.PriorityNormal, 0)
		natstest.Eventually(t, 10*time.Second, func() bool {
			target.mu.Lock()
			defer target.mu.Unlock()
			return target.called[id] == 1
		})
	}
	if li := info(low); li.NumPending == 0 {
		t.Fatal("the low backlog drained before the live commands ran: nothing shows they did not wait for it")
	}
	target.mu.Lock()
	defer target.mu.Unlock()
	if n := len(target.done); n <= 10 {
		t.Fatalf("%d calls: the low band did not run beside the live one", n)
	}
}

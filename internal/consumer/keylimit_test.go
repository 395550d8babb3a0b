package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/wire"
)

// keyTarget is a slow target that counts its calls in flight, per key and
// in all, from its own start and end of each call.
type keyTarget struct {
	mu           sync.Mutex
	inFlight     map[string]int
	all, mostAll int
	mostPerKey   map[string]int
	calls        map[string]int
	work         time.Duration
}

func newKeyTarget(work time.Duration) *keyTarget {
	return &keyTarget{inFlight: map[string]int{}, mostPerKey: map[string]int{}, calls: map[string]int{}, work: work}
}

func (k *keyTarget) handler() Handler {
	return HandlerFunc(func(ctx context.Context, d Delivery) (json.RawMessage, error) {
		var p struct {
			BookingID string `json:"booking_id"`
		}
		_ = json.Unmarshal(d.Payload, &p)
		k.mu.Lock()
		k.calls[d.CommandID]++
		k.inFlight[p.BookingID]++
		k.all++
		k.mostPerKey[p.BookingID] = max(k.mostPerKey[p.BookingID], k.inFlight[p.BookingID])
		k.mostAll = max(k.mostAll, k.all)
		k.mu.Unlock()
		defer func() {
			k.mu.Lock()
			k.inFlight[p.BookingID]--
			k.all--
			k.mu.Unlock()
		}()
		select {
		case <-time.After(k.work):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return nil, nil
	})
}

func TestAConcurrencyKeyHoldsAcrossNodes(t *testing.T) {
	s := natstest.RunServer(t)
	e := newWEnv(t, s)
	target := newKeyTarget(100 * time.Millisecond)
	var ws []*Worker
	for range 2 {
		kc := fast("book_hotel", target.handler())
		kc.Workers, kc.AckWait, kc.ConcurrencyKey = 4, 3*time.Second, "booking_id"
		w, _ := e.node(t, s, kc)
		ws = append(ws, w)
	}
	const n, keys = 20, 4
	var ids []string
	for i := range n {
		ids = append(ids, e.command(t, "book_hotel", fmt.Sprintf("h%d", i), fmt.Sprintf(`{"booking_id":"b%d"}`, i%keys)))
	}
	stats := func() (st Stats) {
		for _, w := range ws {
			s := w.Stats()
			st.Done += s.Done
			st.KeyWaits += s.KeyWaits
			st.Dead += s.Dead
		}
		return st
	}
	natstest.Eventually(t, 60*time.Second, func() bool { return stats().Done == n })
	target.mu.Lock()
	defer target.mu.Unlock()
	for key, most := range target.mostPerKey {
		if most != 1 {
			t.Errorf("key %s: %d calls at once across 2 nodes, want 1", key, most)
		}
	}
	if target.mostAll < 2 {
		t.Errorf("at most %d call in flight of any key: other keys did not go on meanwhile", target.mostAll)
	}
	for _, id := range ids {
		if target.calls[id] != 1 {
			t.Errorf("%s called %d times, want once", id, target.calls[id])
		}
		if rc, ok := e.receipt(t, id); !ok || rc.Attempts != 1 {
			t.Errorf("%s: receipt %+v, want done after 1 attempt (waiting for the key counts none)", id, rc)
		}
	}
	st := stats()
	if st.KeyWaits == 0 || st.Dead != 0 {
		t.Errorf("%d deliveries waited for their key, %d dead letters; want some and none", st.KeyWaits, st.Dead)
	}
	t.Logf("%d calls; at most %d in flight across keys; %d deliveries waited for their key", n, target.mostAll, st.KeyWaits)
}

// A node that dies holding a key (its connection cut mid-call: no release,
// no renewal, as after kill -9) frees it when the key's TTL runs out; the
// other node then runs both the command it held (redelivered after its
// lease) and the one waiting for the key.
func TestAKeyHeldByADeadNodeFreesWithinItsTTL(t *testing.T) {
	s := natstest.RunServer(t)
	e := newWEnv(t, s)
	hang := make(chan struct{})
	started := make(chan string, 1)
	dead := HandlerFunc(func(ctx context.Context, d Delivery) (json.RawMessage, error) {
		started <- d.CommandID
		<-hang // the process is gone: this call never ends nor releases anything
		return nil, nil
	})
	kc := fast("book_hotel", dead)
	kc.Workers, kc.AckWait, kc.ConcurrencyKey = 1, 2*time.Second, "booking_id"
	nc, js := natstest.Connect(t, s)
	ctl, err := OpenControl(t.Context(), js, e.ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc.Control = ctl
	a, err := NewWorker(t.Context(), js, e.ns, kc, e.fb, nil)
	if err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithCancel(context.Background())
	adone := make(chan error, 1)
	go func() { adone <- a.Run(actx) }()
	t.Cleanup(func() { acancel(); <-adone; ctl.Stop() })
	t.Cleanup(func() { close(hang) }) // first: the dead node's call returns, so its Run can

	first := e.command(t, "book_hotel", "first", `{"booking_id":"b1"}`)
	if got := <-started; got != first {
		t.Fatalf("the dying node started %s, want %s", got, first)
	}
	nc.Close() // kill -9: the key stays in KV with its TTL, renewed no more

	target := newKeyTarget(10 * time.Millisecond)
	kb := fast("book_hotel", target.handler())
	kb.Workers, kb.AckWait, kb.ConcurrencyKey = 2, 2*time.Second, "booking_id"
	b, _ := e.node(t, s, kb)
	second := e.command(t, "book_hotel", "second", `{"booking_id":"b1"}`)
	natstest.Eventually(t, 30*time.Second, func() bool { return b.Stats().Done == 2 })
	if b.Stats().KeyWaits == 0 {
		t.Fatal("the live node never waited for the key the dead node held")
	}
	target.mu.Lock()
	defer target.mu.Unlock()
	if target.calls[first] != 1 || target.calls[second] != 1 {
		t.Fatalf("calls on the live node %v, want each of %s and %s once", target.calls, first, second)
	}
}

// A slot outlives the longest call its holder may still be making when
// it dies: its TTL covers the kind's timeout when that is longer than
// AckWait, and a slot taken a while before its call (a rate limit's wait)
// is renewed right before the call, so the TTL counts from the call's
// start. A slot renewed just now is not written again.
func TestAKeySlotOutlivesTheCallsTimeout(t *testing.T) {
	s := natstest.RunServer(t)
	e := newWEnv(t, s)
	ctl, err := OpenControl(t.Context(), e.js, e.ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctl.Stop)
	kc := fast("book_hotel", nil)
	kc.AckWait, kc.Timeout, kc.ConcurrencyKey, kc.Control = time.Second, 5*time.Second, "booking_id", ctl
	k := newKeyLimit(kc, e.js, wire.NamesFor(e.ns).Workers)
	if k.ttl != 6*time.Second {
		t.Fatalf("TTL %v for ack_wait 1s and timeout 5s, want 6s (the timeout and a second)", k.ttl)
	}
	slot, err := k.tryAcquire(t.Context(), "b1", "c1")
	if err != nil || slot == nil {
		t.Fatalf("slot %v, %v", slot, err)
	}
	t.Cleanup(func() { _ = slot.release(context.Background()) })
	rev := func() uint64 {
		slot.mu.Lock()
		defer slot.mu.Unlock()
		return slot.rev
	}
	taken := rev()
	if err := slot.fresh(t.Context(), kc.Timeout); err != nil {
		t.Fatal(err)
	}
	if rev() != taken {
		t.Fatal("a slot taken just now was renewed before its call")
	}
	slot.mu.Lock()
	slot.renewed = slot.renewed.Add(-2 * time.Second) // taken 2 s before the call: a rate limit's wait
	slot.mu.Unlock()
	if err := slot.fresh(t.Context(), kc.Timeout); err != nil {
		t.Fatal(err)
	}
	if rev() == taken {
		t.Fatal("a slot taken 2 s before a call of up to 5 s under a 6 s TTL was not renewed before the call")
	}
}

func TestAConcurrencyKeyIsReadFromThePayloadOrTheAggregate(t *testing.T) {
	k := &keyLimit{path: strings.Split("booking.id", ".")}
	for payload, want := range map[string]string{
		`{"booking":{"id":"B-1"}}`: "B-1",
		`{"booking":{"id":42}}`:    "42",
		`{"booking":{"id":true}}`:  "true",
	} {
		if got, err := k.valueOf(Delivery{Payload: json.RawMessage(payload)}); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", payload, got, err, want)
		}
	}
	for _, payload := range []string{`{}`, `{"booking":"x"}`, `{"booking":{"id":null}}`, `{"booking":{"id":""}}`, `{"booking":{"id":{}}}`, ``} {
		if got, err := k.valueOf(Delivery{Payload: json.RawMessage(payload)}); err == nil {
			t.Errorf("%s: key %q, want an error", payload, got)
		}
	}
	// A personal field, sealed in OUTBOX: keyed by its data subject's ref
	// (the same for every value sealed for that person), never the value.
	sealed := func(ref string) json.RawMessage {
		return json.RawMessage(`{"booking":{"id":{"esjet:sealed":"v1.` + ref + `.1.AAAA"}}}`)
	}
	a1, err1 := k.valueOf(Delivery{Payload: sealed("r7Ab")})
	a2, err2 := k.valueOf(Delivery{Payload: sealed("r7Ab")})
	b, err3 := k.valueOf(Delivery{Payload: sealed("x9Cd")})
	if err1 != nil || err2 != nil || err3 != nil || a1 != a2 || a1 == b || !strings.Contains(a1, "r7Ab") {
		t.Errorf("sealed keys: %q %q %q (%v %v %v); want one key per subject ref", a1, a2, b, err1, err2, err3)
	}
	agg := &keyLimit{}
	if got, err := agg.valueOf(Delivery{AggregateID: "t-1"}); err != nil || got != "t-1" {
		t.Errorf("aggregate id: %q, %v", got, err)
	}
}

func TestConcurrencySettingsAreChecked(t *testing.T) {
	for _, kc := range []KindConfig{
		{Kind: "k", Concurrency: 2},
		{Kind: "k", ConcurrencyKey: "booking_id"}, // no Control
		{Kind: "k", ConcurrencyKey: "booking_id", Concurrency: -1, Control: &Control{}},
		{Kind: "k", ConcurrencyKey: "booking..id", Control: &Control{}},
		{Kind: "k", ConcurrencyKey: "booking id", Control: &Control{}},
	} {
		if err := kc.validateKey(); err == nil {
			t.Errorf("%+v: no error", kc)
		}
	}
	if err := (&KindConfig{Kind: "k", ConcurrencyKey: "booking.id", Control: &Control{}}).validateKey(); err != nil {
		t.Error(err)
	}
}

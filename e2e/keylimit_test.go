package e2e

// Issue 33: "with concurrency_key and max 1 the target never sees two
// calls for one key at once, across nodes and through a kill -9 of a node
// mid-call". A node killed in the middle of a call leaves that call
// running at the target: the key's slot must stay taken until the call
// the dead node left behind is over (the node would have given it up at
// the kind's timeout), even when that is longer than the kind's ack_wait.

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/internal/natstest"
)

// keyCall is one call the hotel target saw: which node made it, for which
// traveler, when it came in and when it was answered.
type keyCall struct {
	node, key, id string
	start, end    time.Time
}

// keyCalls records the hotel target's calls, per node.
type keyCalls struct {
	mu    sync.Mutex
	calls []*keyCall
}

func (c *keyCalls) begin(node, key, id string) *keyCall {
	k := &keyCall{node: node, key: key, id: id, start: time.Now()}
	c.mu.Lock()
	c.calls = append(c.calls, k)
	c.mu.Unlock()
	return k
}

func (c *keyCalls) finish(k *keyCall) {
	c.mu.Lock()
	k.end = time.Now()
	c.mu.Unlock()
}

// running returns a call in flight for between from and to, if any.
func (c *keyCalls) running(from, to time.Duration) *keyCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range c.calls {
		if age := time.Since(k.start); k.end.IsZero() && age >= from && age <= to {
			return k
		}
	}
	return nil
}

// overlaps lists every pair of calls for one key that were in flight at
// once at the target.
func (c *keyCalls) overlaps() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for i, a := range c.calls {
		for _, b := range c.calls[i+1:] {
			if a.key != b.key {
				continue
			}
			aEnd, bEnd := a.end, b.end
			if aEnd.IsZero() {
				aEnd = time.Now()
			}
			if bEnd.IsZero() {
				bEnd = time.Now()
			}
			if a.start.Before(bEnd) && b.start.Before(aEnd) {
				out = append(out, fmt.Sprintf("%s (%s, node %s) %s–%s overlaps %s (%s, node %s) %s–%s", a.id, a.key, a.node,
					a.start.Format("15:04:05.000"), aEnd.Format("15:04:05.000"), b.id, b.key, b.node, b.start.Format("15:04:05.000"), bEnd.Format("15:04:05.000")))
			}
		}
	}
	return out
}

// keyNodeConfig is ledgerNodeConfig for node name, with book_hotel
// limited to one call at a time per traveler (every trip of the load is
// ada's) on the node's own hotel subject, a short ack_wait and a timeout
// well above it.
func keyNodeConfig(t *testing.T, name string) string {
	t.Helper()
	return writeLedgerConfig(t, slices.Sorted(mapKeys(ledgerSubjects)), func(k string) ledgerKind {
		if k != "book_hotel" {
			return ledgerKind{timeout: "5s"}
		}
		return ledgerKind{subject: ledgerSubjects[k] + "." + name, timeout: keyCallTimeout.String(),
			more: "    concurrency_key: traveler\n    concurrency: 1\n"}
	}, "")
}

const (
	keyCallTimeout = 15 * time.Second // book_hotel's timeout: the call may run that long
	keySlowCall    = 8 * time.Second  // a hotel call before the kill: well past ack_wait + its renewals
)

// TestFaultKill9MidCallKeepsTheConcurrencyKey: three nodes on one NATS
// server serve book_hotel with concurrency_key traveler and concurrency 1;
// every trip is ada's, so the fleet makes one hotel call at a time. Hotel
// calls take 8 s (ack_wait is 2 s, timeout 15 s) until a node is killed -9
// in the middle of one, with other trips' hotel commands waiting for the
// key; the target goes on with the dead node's call. The target never sees
// two calls for ada at once, every trip is confirmed, and every effect ran
// once.
func TestFaultKill9MidCallKeepsTheConcurrencyKey(t *testing.T) {
	t.Parallel()
	srv := natstest.RunServer(t, natstest.SyncAlways())
	url := srv.ClientURL()
	ledger := newEffectLedger(t)
	var killed atomic.Bool
	ledger.delayOf = func(kind string, m *nats.Msg) time.Duration {
		if kind == "book_hotel" && !killed.Load() {
			return keySlowCall
		}
		if kind == "book_hotel" {
			return 100 * time.Millisecond
		}
		return 0
	}
	ledger.attach(url)
	calls := &keyCalls{}
	hotels, err := nats.Connect(url, nats.MaxReconnects(-1), nats.Name("hotels"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hotels.Close)
	var hotelCalls sync.WaitGroup
	t.Cleanup(hotelCalls.Wait)
	if _, err := hotels.Subscribe(ledgerSubjects["book_hotel"]+".*", func(m *nats.Msg) {
		node := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
		c := calls.begin(node, "ada", m.Header.Get("Idempotency-Key"))
		hotelCalls.Go(func() {
			ledger.handle("book_hotel", m)
			calls.finish(c)
		})
	}); err != nil {
		t.Fatal(err)
	}
	if err := hotels.Flush(); err != nil {
		t.Fatal(err)
	}

	nodes := map[string]*node{}
	for _, name := range []string{"a", "b", "c"} {
		nodes[name] = startNodeEnv(t, t.TempDir(), faultEnv, "--url", url, "--config", keyNodeConfig(t, name))
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"a", "b", "c"} {
				logLines(t, "node "+name, nodes[name].stderr.String(), "concurrency key", "WARN", "ERROR")
			}
		}
	})
	var dead atomic.Pointer[string]
	var rr atomic.Int64
	names := []string{"a", "b", "c"}
	addr := func() string { // a load balancer that stops sending to the dead node
		for {
			n := names[rr.Add(1)%3]
			if d := dead.Load(); d == nil || *d != n {
				return nodes[n].httpAddr
			}
		}
	}
	const trips = 12
	load := startLoad(t, addr, trips, faultClients, faultPace)

	// A hotel call in flight (its start less than ack_wait ago, so a key
	// held for ack_wait and a bit would run out before the call ends), and
	// the flights of at least half the trips booked: their hotel commands
	// (issued with the flights) wait for ada's key on the nodes.
	var victim *keyCall
	natstest.Eventually(t, 60*time.Second, func() bool {
		victim = calls.running(200*time.Millisecond, faultAckWait)
		return victim != nil && ledger.stats().keys >= trips+trips/2
	})
	killed.Store(true)
	n := nodes[victim.node]
	dead.Store(&victim.node)
	n.kill9(t)
	killedAt := time.Now()
	t.Logf("node %s killed -9 %v into its call %s; %d trip(s) acknowledged", victim.node,
		killedAt.Sub(victim.start).Round(time.Millisecond), victim.id, load.ackedCount())

	var live string
	for _, name := range names {
		if name != victim.node {
			live = name
		}
	}
	checkScenario(t, scenario{name: "kill9-mid-call-concurrency-key", load: load, ledger: ledger,
		httpAddr: func() string { return nodes[live].httpAddr }, natsURL: url, recovered: killedAt})

	calls.mu.Lock()
	total, end := len(calls.calls), victim.end
	var after int
	for _, c := range calls.calls {
		if c.start.After(killedAt) {
			after++
		}
	}
	calls.mu.Unlock()
	if end.Before(killedAt) {
		t.Fatalf("the dead node's call %s ended at the target before the kill: the test did not kill mid-call", victim.id)
	}
	if after == 0 {
		t.Fatal("no hotel call started after the kill: nothing waited for the key")
	}
	if o := calls.overlaps(); len(o) > 0 {
		t.Fatalf("the target saw %d pair(s) of calls for one key at once:\n%s", len(o), strings.Join(o, "\n"))
	}
	t.Logf("the target saw %d hotel call(s), %d started after the kill; the dead node's call ran on %v past it; none overlapped",
		total, after, end.Sub(killedAt).Round(time.Millisecond))
	for _, name := range names {
		if name != victim.node {
			nodes[name].stop(t, syscall.SIGTERM)
		}
	}
}

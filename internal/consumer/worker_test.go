package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

type wEnv struct {
	js jetstream.JetStream
	nc *nats.Conn
	ns string
	fb *recorder
	// receipts, when set, group-commits the workers' receipt writes.
	receipts *streams.Committer
}

func newWEnv(t *testing.T, s *server.Server) *wEnv {
	t.Helper()
	nc, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	if _, err := streams.Provision(t.Context(), js, ns, streams.ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	return &wEnv{js: js, nc: nc, ns: ns, fb: &recorder{}}
}

// recorder is the aggregate side: it records the outcomes reported.
type recorder struct {
	mu      sync.Mutex
	reports []wire.Report
	keys    map[string]bool
}

func (r *recorder) Report(_ context.Context, rep wire.Report) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil {
		r.keys = map[string]bool{}
	}
	if r.keys[rep.IdempotencyKey] {
		return nil // what the repository does with a repeated key
	}
	r.keys[rep.IdempotencyKey] = true
	r.reports = append(r.reports, rep)
	return nil
}

func (r *recorder) all() []wire.Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]wire.Report(nil), r.reports...)
}

// command publishes a command to OUTBOX as the relay does.
func (e *wEnv) command(t *testing.T, kind, id string, payload string) string {
	t.Helper()
	cmdID := fmt.Sprintf("trip:%s:1:0", id)
	m := nats.NewMsg(wire.CommandSubject(e.ns, kind))
	m.Data = []byte(payload)
	for k, v := range map[string]string{
		jetstream.MsgIDHeader: cmdID, wire.HeaderCommandID: cmdID, wire.HeaderCommandKind: kind,
		wire.HeaderAggregateType: "trip", wire.HeaderAggregateID: id, wire.HeaderVersion: "1",
		wire.HeaderDecisionID: "d-" + id, wire.HeaderReport: "true",
	} {
		m.Header.Set(k, v)
	}
	if _, err := e.js.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	return cmdID
}

func (e *wEnv) start(t *testing.T, kc KindConfig) *Worker {
	t.Helper()
	if kc.Receipts == nil {
		kc.Receipts = e.receipts
	}
	return e.startWith(t, kc, e.fb)
}

// startWith runs a worker reporting to fb until the test ends.
func (e *wEnv) startWith(t *testing.T, kc KindConfig, fb Feedback) *Worker {
	t.Helper()
	w, err := NewWorker(t.Context(), e.js, e.ns, kc, fb, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func (e *wEnv) receipt(t *testing.T, id string) (wire.Receipt, bool) {
	t.Helper()
	kv, err := e.js.KeyValue(t.Context(), streams.NamesFor(e.ns).Receipts)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kv.Get(t.Context(), wire.ReceiptKey(id))
	if err != nil {
		return wire.Receipt{}, false
	}
	var rc wire.Receipt
	_ = json.Unmarshal(entry.Value(), &rc)
	return rc, true
}

func (e *wEnv) deadLetters(t *testing.T) int {
	t.Helper()
	st, err := e.js.Stream(t.Context(), streams.NamesFor(e.ns).DLQ)
	if err != nil {
		t.Fatal(err)
	}
	return int(st.CachedInfo().State.Msgs)
}

func fast(kind string, h Handler) KindConfig {
	return KindConfig{Kind: kind, Handler: h, Workers: 2, AckWait: 2 * time.Second, Timeout: time.Second,
		MaxAttempts: 5, BackoffInitial: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond, Node: "test"}
}

func TestWorker(t *testing.T) {
	s := natstest.RunServer(t)
	runWorkerSuite(t, func(t *testing.T) *wEnv { return newWEnv(t, s) })
}

// The same suite with the receipts written through group commit (batches
// of 2 and more), as a node under sync always writes them.
func TestWorkerRefusesAReceiptsCommitterOfAnotherNamespace(t *testing.T) {
	s := natstest.RunServer(t)
	e := newWEnv(t, s)
	other := streams.NewCommitter(e.js, "KV_"+streams.NamesFor(e.ns+"x").Receipts, streams.GroupCommit{MinBatch: 2}, time.Second, nil)
	kc := fast("pay", HandlerFunc(func(context.Context, Delivery) (json.RawMessage, error) { return nil, nil }))
	kc.Receipts = other
	if _, err := NewWorker(t.Context(), e.js, e.ns, kc, e.fb, nil); err == nil || !strings.Contains(err.Error(), "receipts committer") {
		t.Fatalf("worker with another namespace's receipts committer: %v, want refused", err)
	}
}

func TestWorkerGroupCommittedReceipts(t *testing.T) {
	s := natstest.RunServer(t, natstest.SyncAlways())
	runWorkerSuite(t, func(t *testing.T) *wEnv {
		e := newWEnv(t, s)
		e.receipts = streams.NewCommitter(e.js, "KV_"+streams.NamesFor(e.ns).Receipts, streams.GroupCommit{MinBatch: 2}, 5*time.Second, nil)
		return e
	})
}

func runWorkerSuite(t *testing.T, mk func(t *testing.T) *wEnv) {
	t.Run("fails twice then succeeds: one effect, three attempts, a receipt", func(t *testing.T) { t.Parallel(); testFlaky(t, mk(t)) })
	t.Run("terminal failure: dead letter, failed receipt, failure reported", func(t *testing.T) { t.Parallel(); testTerminal(t, mk(t)) })
	t.Run("attempts exhausted: dead letter", func(t *testing.T) { t.Parallel(); testExhausted(t, mk(t)) })
	t.Run("poison payload: dead letter after one attempt", func(t *testing.T) { t.Parallel(); testPoison(t, mk(t)) })
	t.Run("a command already done is acked without running", func(t *testing.T) { t.Parallel(); testDoneReceipt(t, mk(t)) })
	t.Run("done, cleared and new commands side by side: each new or cleared one runs once, no done one runs", func(t *testing.T) { t.Parallel(); testReceiptsSideBySide(t, mk(t)) })
	t.Run("an id that cannot key a receipt: poison, never run", func(t *testing.T) { t.Parallel(); testUnkeyableID(t, mk(t)) })
	t.Run("handler past its deadline is cancelled", func(t *testing.T) { t.Parallel(); testDeadline(t, mk(t)) })
	t.Run("heartbeats keep the lease past AckWait", func(t *testing.T) { t.Parallel(); testHeartbeat(t, mk(t)) })
	t.Run("two nodes share 1000 commands, each effect once", func(t *testing.T) { t.Parallel(); testTwoNodes(t, mk(t)) })
	t.Run("HTTP target: 500, 429 with Retry-After, 409", func(t *testing.T) { t.Parallel(); testHTTPTarget(t, mk(t)) })
	t.Run("NATS target: result and errors", func(t *testing.T) { t.Parallel(); testNATSTarget(t, mk(t)) })
}

func testFlaky(t *testing.T, e *wEnv) {
	var calls, effects atomic.Int64
	w := e.start(t, fast("pay", HandlerFunc(func(ctx context.Context, d Delivery) (json.RawMessage, error) {
		if calls.Add(1) <= 2 {
			return nil, errors.New("gateway busy")
		}
		effects.Add(1)
		return json.RawMessage(`{"paid":true}`), nil
	})))
	id := e.command(t, "pay", "f1", `{"amount":5}`)
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Done == 1 })
	if calls.Load() != 3 || effects.Load() != 1 {
		t.Fatalf("%d calls, %d effects; want 3 and 1", calls.Load(), effects.Load())
	}
	rc, ok := e.receipt(t, id)
	if !ok || rc.Outcome != wire.OutcomeDone || rc.Attempts != 3 || string(rc.Result) != `{"paid":true}` {
		t.Fatalf("receipt %+v %v", rc, ok)
	}
	reps := e.fb.all()
	if len(reps) != 1 || reps[0].Kind != "pay_done" || reps[0].AggregateID != "f1" || reps[0].IdempotencyKey != id+"/done" {
		t.Fatalf("reports %+v", reps)
	}
	var out wire.Outcome
	_ = json.Unmarshal(reps[0].Payload, &out)
	if out.CommandID != id || string(out.Result) != `{"paid":true}` {
		t.Fatalf("reported outcome %+v", out)
	}
}

func testTerminal(t *testing.T, e *wEnv) {
	var calls atomic.Int64
	w := e.start(t, fast("book", HandlerFunc(func(ctx context.Context, d Delivery) (json.RawMessage, error) {
		calls.Add(1)
		return nil, Terminal(errors.New("no seats"))
	})))
	id := e.command(t, "book", "t1", `{}`)
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Dead == 1 })
	if calls.Load() != 1 || e.deadLetters(t) != 1 {
		t.Fatalf("%d calls, %d dead letters", calls.Load(), e.deadLetters(t))
	}
	// The failed receipt is written before the dead letter (see
	// TestAFailureIsReportedBeforeItsLetterCanBeRetried).
	var rc wire.Receipt
	natstest.Eventually(t, 5*time.Second, func() bool { rc, _ = e.receipt(t, id); return rc.Outcome != "" })
	if rc.Outcome != wire.OutcomeFailed || rc.LastError == "" {
		t.Fatalf("receipt %+v", rc)
	}
	natstest.Eventually(t, 5*time.Second, func() bool { return len(e.fb.all()) == 1 })
	if r := e.fb.all()[0]; r.Kind != "book_failed" || r.IdempotencyKey != id+"/failed" {
		t.Fatalf("report %+v", r)
	}
	// The command is termed: it does not come back.
	cons, _ := e.js.Consumer(t.Context(), streams.NamesFor(e.ns).Outbox, wire.WorkerConsumerName("book"))
	natstest.Eventually(t, 5*time.Second, func() bool {
		info, err := cons.Info(t.Context())
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	})
}

func testExhausted(t *testing.T, e *wEnv) {
	var calls atomic.Int64
	kc := fast("sync", HandlerFunc(func(ctx context.Context, d Delivery) (json.RawMessage, error) {
		calls.Add(1)
		return nil, errors.New("still down")
	}))
	kc.MaxAttempts = 3
	w := e.start(t, kc)
	e.command(t, "sync", "x1", `{}`)
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Dead == 1 })
	if calls.Load() != 3 || w.Stats().Retried != 2 {
		t.Fatalf("%d calls, stats %+v; want 3 calls then the dead letter", calls.Load(), w.Stats())
	}
}

func testPoison(t *testing.T, e *wEnv) {
	var calls atomic.Int64
	w := e.start(t, fast("mail", HandlerFunc(func(ctx context.Context, d Delivery) (json.RawMessage, error) {
		calls.Add(1)
		return nil, nil
	})))
	e.command(t, "mail", "p1", `{not json`)
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Dead == 1 })
	if calls.Load() != 0 || w.Stats().Poison != 1 || w.Stats().Retried != 0 {
		t.Fatalf("handler called %d times, stats %+v", calls.Load(), w.Stats())
	}
}

func testDoneReceipt(t *testing.T, e *wEnv) {
	kv, _ := e.js.KeyValue(t.Context(), streams.NamesFor(e.ns).Receipts)
	id := "trip:r1:1:0"
	rc, _ := json.Marshal(wire.Receipt{CommandID: id, Kind: "ship", Outcome: wire.OutcomeDone, Attempts: 1, Result: json.RawMessage(`{"n":1}`)})
	if _, err := kv.Create(t.Context(), wire.ReceiptKey(id), rc); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	w := e.start(t, fast("ship", HandlerFunc(func(ctx context.Context, d Delivery) (json.RawMessage, error) {
		calls.Add(1)
		return nil, nil
	})))
	e.command(t, "ship", "r1", `{}`)
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Skipped == 1 })
	if calls.Load() != 0 {
		t.Fatal("the handler ran for a command already done")
	}
	natstest.Eventually(t, 5*time.Second, func() bool { return len(e.fb.all()) == 1 })
}

// testReceiptsSideBySide reads many receipts at once (under group commit,
// the reads made during a receipts round go out together): a command with
// a done receipt on record is skipped, one whose receipt was cleared (a
// delete or purge marker, as `esjet dlq retry` leaves) runs as one without.
func testReceiptsSideBySide(t *testing.T, e *wEnv) {
	kv, err := e.js.KeyValue(t.Context(), streams.NamesFor(e.ns).Receipts)
	if err != nil {
		t.Fatal(err)
	}
	const n = 150
	id := func(i int) string { return fmt.Sprintf("trip:m%d:1:0", i) }
	for i := range n {
		if i%3 == 2 {
			continue // new: no receipt
		}
		outcome := wire.OutcomeDone
		if i%3 == 1 {
			outcome = wire.OutcomeFailed
		}
		rc, _ := json.Marshal(wire.Receipt{CommandID: id(i), Kind: "sort", Outcome: outcome, Attempts: 1, Result: json.RawMessage(`{"n":1}`)})
		if _, err := kv.Create(t.Context(), wire.ReceiptKey(id(i)), rc); err != nil {
			t.Fatal(err)
		}
		if i%3 == 1 {
			clear := func(ctx context.Context, key string) error { return kv.Delete(ctx, key) }
			if i%2 == 0 {
				// A purge marker as kv.Purge writes it, less the roll-up
				// the receipts bucket refuses (esjet never purges).
				clear = func(ctx context.Context, key string) error {
					m := nats.NewMsg("$KV." + streams.NamesFor(e.ns).Receipts + "." + key)
					m.Header.Set("KV-Operation", "PURGE")
					_, err := e.js.PublishMsg(ctx, m)
					return err
				}
			}
			if err := clear(t.Context(), wire.ReceiptKey(id(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	calls := map[string]int{}
	kc := fast("sort", HandlerFunc(func(ctx context.Context, d Delivery) (json.RawMessage, error) {
		mu.Lock()
		calls[d.CommandID]++
		mu.Unlock()
		return nil, nil
	}))
	kc.Workers = 16
	// Not a test of leases: a lease that ran out on a busy machine would
	// redeliver a command done already, counted once as done and once as
	// skipped (seen under two -race suites at once).
	kc.AckWait = time.Minute
	for i := range n {
		e.command(t, "sort", fmt.Sprintf("m%d", i), `{}`)
	}
	w := e.start(t, kc)
	natstest.Eventually(t, 60*time.Second, func() bool { s := w.Stats(); return s.Done+s.Skipped == n })
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		if want := min(i%3, 1); calls[id(i)] != want {
			t.Errorf("command %d (receipt %s) ran %d time(s), want %d", i, []string{"done", "cleared", "none"}[i%3], calls[id(i)], want)
		}
	}
	if s := w.Stats(); s.Skipped != n/3 || s.Done != n-n/3 {
		t.Errorf("stats %+v: want %d skipped and %d done", s, n/3, n-n/3)
	}
	// Under group commit, 16 workers over 150 commands read during
	// receipts rounds: some of those reads went out together.
	if st := e.receipts.Stats(); e.receipts.Batching() && (st.ReadRounds == 0 || st.ReadsTogether < st.ReadRounds) {
		t.Errorf("receipts committer %+v: no reads went out together", st)
	}
}

// testUnkeyableID: kv.Get refuses a key with a space, and so does the read
// through the receipts committer (which builds the subject itself): the
// command is dead-lettered as poison, not run with no receipt.
func testUnkeyableID(t *testing.T, e *wEnv) {
	var calls atomic.Int64
	w := e.start(t, fast("ship", HandlerFunc(func(ctx context.Context, d Delivery) (json.RawMessage, error) {
		calls.Add(1)
		return nil, nil
	})))
	e.command(t, "ship", "bad id", `{}`)
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Dead == 1 })
	if s := w.Stats(); calls.Load() != 0 || s.Poison != 1 {
		t.Fatalf("handler calls %d, stats %+v; want one poison dead letter and no call", calls.Load(), s)
	}
}

func testDeadline(t *testing.T, e *wEnv) {
	var cancelled atomic.Int64
	kc := fast("slow", HandlerFunc(func(ctx context.Context, d Delivery) (json.RawMessage, error) {
		<-ctx.Done()
		cancelled.Add(1)
		return nil, Terminal(ctx.Err())
	}))
	kc.Timeout = 200 * time.Millisecond
	w := e.start(t, kc)
	e.command(t, "slow", "s1", `{}`)
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Dead == 1 })
	if cancelled.Load() != 1 {
		t.Fatalf("handler context cancelled %d times", cancelled.Load())
	}
}

func testHeartbeat(t *testing.T, e *wEnv) {
	var calls atomic.Int64
	kc := fast("long", HandlerFunc(func(ctx context.Context, d Delivery) (json.RawMessage, error) {
		calls.Add(1)
		select {
		case <-time.After(2500 * time.Millisecond): // longer than AckWait
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}))
	kc.AckWait, kc.Timeout = time.Second, 5*time.Second
	w := e.start(t, kc)
	e.command(t, "long", "h1", `{}`)
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Done == 1 })
	if calls.Load() != 1 {
		t.Fatalf("handler ran %d times: the lease expired under a running handler", calls.Load())
	}
}

func testTwoNodes(t *testing.T, e *wEnv) {
	var mu sync.Mutex
	effects := map[string]int{}
	var byNode [2]atomic.Int64
	mk := func(node int) Handler {
		return HandlerFunc(func(ctx context.Context, d Delivery) (json.RawMessage, error) {
			mu.Lock()
			effects[d.IdempotencyKey()]++
			mu.Unlock()
			byNode[node].Add(1)
			return nil, nil
		})
	}
	a := e.start(t, KindConfig{Kind: "note", Handler: mk(0), Workers: 4, Node: "a"})
	b := e.start(t, KindConfig{Kind: "note", Handler: mk(1), Workers: 4, Node: "b"})
	for i := range 1000 {
		e.command(t, "note", fmt.Sprintf("n%d", i), `{}`)
	}
	natstest.Eventually(t, 30*time.Second, func() bool { return a.Stats().Done+b.Stats().Done == 1000 })
	mu.Lock()
	defer mu.Unlock()
	if len(effects) != 1000 {
		t.Fatalf("%d distinct effects, want 1000", len(effects))
	}
	for k, n := range effects {
		if n != 1 {
			t.Fatalf("command %s applied %d times", k, n)
		}
	}
	if byNode[0].Load() == 0 || byNode[1].Load() == 0 {
		t.Fatalf("work not shared: %d and %d", byNode[0].Load(), byNode[1].Load())
	}
	t.Logf("node a %d, node b %d", byNode[0].Load(), byNode[1].Load())
}

func testHTTPTarget(t *testing.T, e *wEnv) {
	var mu sync.Mutex
	seen := map[string][]time.Time{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(HeaderIdempotencyKey)
		mu.Lock()
		seen[key] = append(seen[key], time.Now())
		n := len(seen[key])
		mu.Unlock()
		switch {
		case r.Header.Get(wire.HeaderAggregateID) == "conflict":
			http.Error(w, "already booked differently", http.StatusConflict)
		case r.Header.Get(wire.HeaderAggregateID) == "busy" && n == 1:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		case r.Header.Get(wire.HeaderAggregateID) == "broken" && n == 1:
			http.Error(w, "boom", http.StatusInternalServerError)
		default:
			if r.Header.Get(HeaderAttempt) != fmt.Sprint(n) {
				http.Error(w, "attempt header "+r.Header.Get(HeaderAttempt), http.StatusBadRequest)
				return
			}
			_, _ = w.Write([]byte(`{"ok":true}`))
		}
	}))
	defer srv.Close()
	w := e.start(t, fast("post", HTTPTarget{URL: srv.URL}))
	busy := e.command(t, "post", "busy", `{}`)
	broken := e.command(t, "post", "broken", `{}`)
	conflict := e.command(t, "post", "conflict", `{}`)
	natstest.Eventually(t, 15*time.Second, func() bool { return w.Stats().Done == 2 && w.Stats().Dead == 1 })
	mu.Lock()
	defer mu.Unlock()
	if len(seen[busy]) != 2 || seen[busy][1].Sub(seen[busy][0]) < 900*time.Millisecond {
		t.Fatalf("429 with Retry-After 1: attempts at %v", seen[busy])
	}
	if len(seen[broken]) != 2 {
		t.Fatalf("500: %d attempts, want 2", len(seen[broken]))
	}
	if len(seen[conflict]) != 1 {
		t.Fatalf("409: %d attempts, want 1 (terminal)", len(seen[conflict]))
	}
	if rc, _ := e.receipt(t, conflict); rc.Outcome != wire.OutcomeFailed {
		t.Fatalf("409 receipt %+v", rc)
	}
}

func testNATSTarget(t *testing.T, e *wEnv) {
	sub, err := e.nc.Subscribe("svc.reserve", func(m *nats.Msg) {
		switch m.Header.Get(wire.HeaderAggregateID) {
		case "bad":
			_ = m.Respond([]byte(`{"error":"sold out","retryable":false}`))
		default:
			_ = m.Respond([]byte(`{"result":{"key":"` + m.Header.Get(HeaderIdempotencyKey) + `"}}`))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	w := e.start(t, fast("reserve", NATSTarget{Conn: e.nc, Subject: "svc.reserve"}))
	good := e.command(t, "reserve", "good", `{}`)
	e.command(t, "reserve", "bad", `{}`)
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Done == 1 && w.Stats().Dead == 1 })
	rc, _ := e.receipt(t, good)
	if string(rc.Result) != `{"key":"`+good+`"}` {
		t.Fatalf("result %s: the idempotency key did not reach the service", rc.Result)
	}
}

// scriptedReceipts answers receipt reads from a script, then as the bucket
// does: "fail" as a server that does not answer in time, "absent" as a
// key not (yet) written.
type scriptedReceipts struct {
	jetstream.KeyValue
	mu     sync.Mutex
	script []string
	reads  int
}

func (s *scriptedReceipts) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	s.mu.Lock()
	step := ""
	if s.reads < len(s.script) {
		step = s.script[s.reads]
	}
	s.reads++
	s.mu.Unlock()
	switch step {
	case "fail":
		return nil, context.DeadlineExceeded
	case "absent":
		return nil, jetstream.ErrKeyNotFound
	}
	return s.KeyValue.Get(ctx, key)
}

// startScripted starts a "ship" worker whose receipt reads follow script,
// with a done receipt already on record for trip:<agg>:1:0 when done is
// set; it returns the worker and its handler's call count.
func startScripted(t *testing.T, e *wEnv, agg string, done bool, script ...string) (*Worker, *atomic.Int64) {
	t.Helper()
	if done {
		kv, err := e.js.KeyValue(t.Context(), streams.NamesFor(e.ns).Receipts)
		if err != nil {
			t.Fatal(err)
		}
		id := "trip:" + agg + ":1:0"
		rc, _ := json.Marshal(wire.Receipt{CommandID: id, Kind: "ship", Outcome: wire.OutcomeDone, Attempts: 1, Result: json.RawMessage(`{"n":1}`)})
		if _, err := kv.Create(t.Context(), wire.ReceiptKey(id), rc); err != nil {
			t.Fatal(err)
		}
	}
	calls := &atomic.Int64{}
	w, err := NewWorker(t.Context(), e.js, e.ns, fast("ship", HandlerFunc(func(ctx context.Context, d Delivery) (json.RawMessage, error) {
		calls.Add(1)
		return json.RawMessage(`{"n":2}`), nil
	})), e.fb, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.receipts = &scriptedReceipts{KeyValue: w.receipts, script: script}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-stopped })
	return w, calls
}

// TestACommandWhoseReceiptCannotBeReadDoesNotRun: a delivery of a command
// already done (a redelivery after a lost ack) whose receipt read fails is
// not run: the worker reads the receipt again, holding its lease, and
// counts no attempt, so a stall longer than the retry budget (MaxAttempts
// 5 here, seven failed reads) does not dead-letter it either. Before, a
// failed read counted as "no receipt" and the target was called again.
func TestACommandWhoseReceiptCannotBeReadDoesNotRun(t *testing.T) {
	t.Parallel()
	e := newWEnv(t, natstest.RunServer(t))
	w, calls := startScripted(t, e, "u1", true, "fail", "fail", "fail", "fail", "fail", "fail", "fail")
	e.command(t, "ship", "u1", `{}`)
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Skipped == 1 })
	if n := calls.Load(); n != 0 {
		t.Fatalf("the handler ran %d times for a command already done whose receipt could not be read", n)
	}
	if s := w.Stats(); s.UnreadReceipts != 7 || s.Dead != 0 {
		t.Fatalf("stats %+v; want the seven failed reads read again, nothing dead-lettered", s)
	}
	natstest.Eventually(t, 5*time.Second, func() bool { return len(e.fb.all()) == 1 })
	if got := string(e.fb.all()[0].Payload); !strings.Contains(got, `{"n":1}`) {
		t.Fatalf("reported %s, want the receipt's result", got)
	}
}

// TestAReceiptOnRecordButUnreadableIsNotReportedOver: the worker found no
// receipt, ran the command, and met another's receipt when it stored its
// own (another delivery finished first), but could not read that one
// back. It reports nothing then — its result may differ from the one on
// record — and the next delivery reports what the receipt holds. Before,
// it reported its own result.
func TestAReceiptOnRecordButUnreadableIsNotReportedOver(t *testing.T) {
	t.Parallel()
	e := newWEnv(t, natstest.RunServer(t))
	w, calls := startScripted(t, e, "h1", true, "absent", "fail", "fail", "fail")
	e.command(t, "ship", "h1", `{}`)
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Skipped == 1 })
	if n := calls.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want the one call made before the receipt was met", n)
	}
	natstest.Eventually(t, 5*time.Second, func() bool { return len(e.fb.all()) == 1 })
	if got := string(e.fb.all()[0].Payload); !strings.Contains(got, `{"n":1}`) {
		t.Fatalf("reported %s, want the result on record", got)
	}
}

// TestACommandIDThatCannotKeyAReceiptIsDeadLettered: no receipt can be kept
// for an id that is not a valid key, so the command cannot run once and
// only once: it is dead-lettered as poison, not run, and not read again
// forever.
func TestACommandIDThatCannotKeyAReceiptIsDeadLettered(t *testing.T) {
	t.Parallel()
	e := newWEnv(t, natstest.RunServer(t))
	w, calls := startScripted(t, e, "", false)
	e.command(t, "ship", "bad id", `{}`)
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Dead == 1 })
	if s := w.Stats(); calls.Load() != 0 || s.Poison != 1 || s.UnreadReceipts != 0 {
		t.Fatalf("handler calls %d, stats %+v; want one poison dead letter, no call", calls.Load(), s)
	}
}

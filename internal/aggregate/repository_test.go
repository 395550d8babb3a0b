package aggregate

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// account is the test aggregate: a balance with deposits and withdrawals.
type account struct {
	Opened  bool  `json:"opened"`
	Balance int64 `json:"balance"`
	Ops     int   `json:"ops"`
}

type amount struct {
	Amount int64 `json:"amount"`
}

func accountDef(schema int) *Definition {
	d := Define("account", schema, func(s account, e Event) account {
		switch e.Type {
		case "opened":
			s.Opened = true
		case "deposited":
			var a amount
			_ = e.Decode(&a)
			s.Balance += a.Amount
		case "withdrawn":
			var a amount
			_ = e.Decode(&a)
			s.Balance -= a.Amount
		}
		s.Ops++
		return s
	})
	On(d, "open", func(s account, _ struct{}) (Decision, error) {
		if s.Opened {
			return Decision{}, Reject("already_open", "account is open")
		}
		return Emit("opened", nil), nil
	})
	On(d, "deposit", func(s account, c amount) (Decision, error) {
		if c.Amount <= 0 {
			return Decision{}, Reject("invalid_amount", "amount %d must be positive", c.Amount)
		}
		return Emit("deposited", c).Issue("notify", map[string]int64{"amount": c.Amount}), nil
	})
	On(d, "withdraw", func(s account, c amount) (Decision, error) {
		if c.Amount > s.Balance {
			return Decision{}, Reject("insufficient_funds", "balance %d < %d", s.Balance, c.Amount)
		}
		return Emit("withdrawn", c), nil
	})
	On(d, "noop", func(s account, _ struct{}) (Decision, error) { return Decision{}, nil })
	On(d, "bulk", func(s account, c struct{ N int }) (Decision, error) {
		d := Decision{}
		for range c.N {
			d = d.Then("deposited", amount{Amount: 1})
		}
		return d, nil
	})
	return d.Definition()
}

type fixture struct {
	js    jetstream.JetStream
	ns    string
	log   *streams.Log
	snaps jetstream.KeyValue
}

func newFixture(t *testing.T, s *server.Server) *fixture {
	t.Helper()
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	if _, err := streams.Provision(t.Context(), js, ns, streams.ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	l, err := streams.Open(t.Context(), js, ns, streams.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), streams.NamesFor(ns).Snapshots)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{js: js, ns: ns, log: l, snaps: kv}
}

// repo is a fresh repository: a new node, or a restarted one, with an empty cache.
func (f *fixture) repo(t *testing.T, cfg Config, defs ...*Definition) *Repository {
	t.Helper()
	if len(defs) == 0 {
		defs = []*Definition{accountDef(1)}
	}
	reg, err := NewRegistry(defs...)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Namespace = f.ns
	return NewRepository(f.log, f.snaps, reg, cfg, nil)
}

func (f *fixture) msgs(t *testing.T) uint64 {
	t.Helper()
	st, err := f.js.Stream(t.Context(), streams.NamesFor(f.ns).Events)
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().State.Msgs
}

func send(t *testing.T, r *Repository, id, kind string, payload string, key string) (Result, error) {
	t.Helper()
	return r.Handle(t.Context(), Request{Type: "account", ID: id, Kind: kind, Payload: json.RawMessage(payload), IdempotencyKey: key})
}

func mustSend(t *testing.T, r *Repository, id, kind, payload, key string) Result {
	t.Helper()
	res, err := send(t, r, id, kind, payload, key)
	if err != nil {
		t.Fatalf("%s %s %s: %v", id, kind, payload, err)
	}
	return res
}

func TestRepository(t *testing.T) {
	s := natstest.RunServer(t)
	t.Run("command round trip", func(t *testing.T) { t.Parallel(); testHandleRoundTrip(t, newFixture(t, s)) })
	t.Run("rejections and bad input write nothing", func(t *testing.T) { t.Parallel(); testRejections(t, newFixture(t, s)) })
	t.Run("16 goroutines on two nodes lose no update", func(t *testing.T) { t.Parallel(); testConcurrentNodes(t, newFixture(t, s)) })
	t.Run("idempotency key", func(t *testing.T) { t.Parallel(); testIdempotency(t, newFixture(t, s)) })
	t.Run("10000-event aggregate loads from its snapshot", func(t *testing.T) { t.Parallel(); testSnapshotLoad(t, newFixture(t, s)) })
	t.Run("unknown snapshot schema falls back to replay", func(t *testing.T) { t.Parallel(); testSnapshotSchema(t, newFixture(t, s)) })
	t.Run("stale cache is refreshed on conflict", func(t *testing.T) { t.Parallel(); testStaleCache(t, newFixture(t, s)) })
}

func testHandleRoundTrip(t *testing.T, f *fixture) {
	r := f.repo(t, Config{})
	open := mustSend(t, r, "a1", "open", ``, "")
	if open.Version != 1 || len(open.Events) != 1 || open.Events[0].Type != "opened" || open.Seq == 0 {
		t.Fatalf("open = %+v", open)
	}
	dep := mustSend(t, r, "a1", "deposit", `{"amount": 50}`, "")
	if dep.Version != 2 || len(dep.Commands) != 1 || dep.Commands[0].ID != "account:a1:2:0" || dep.Commands[0].Kind != "notify" || !dep.Commands[0].Report {
		t.Fatalf("deposit = %+v", dep)
	}
	if dep.Events[0].Seq != dep.Seq || dep.Events[0].Version != 2 {
		t.Fatalf("event ref = %+v", dep.Events[0])
	}
	st, err := r.Get(t.Context(), "account", "a1")
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Value.(account); got.Balance != 50 || got.Ops != 2 || st.Position.Version != 2 {
		t.Fatalf("state = %+v at %+v", got, st.Position)
	}
	noop := mustSend(t, r, "a1", "noop", ``, "")
	if noop.Version != 2 || len(noop.Events) != 0 {
		t.Fatalf("noop = %+v", noop)
	}
	if _, err := r.Get(t.Context(), "account", "nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of a missing aggregate: %v", err)
	}
	if f.msgs(t) != 2 {
		t.Fatalf("%d messages, want 2", f.msgs(t))
	}
}

func testRejections(t *testing.T, f *fixture) {
	r := f.repo(t, Config{})
	mustSend(t, r, "a1", "open", ``, "")
	before := f.msgs(t)
	cases := []struct {
		name, typ, id, kind, payload string
		want                         error
	}{
		{"domain rejection", "account", "a1", "withdraw", `{"amount": 10}`, ErrRejected},
		{"rejected by validation", "account", "a1", "deposit", `{"amount": -1}`, ErrRejected},
		{"unknown type", "nope", "a1", "open", ``, ErrUnknownType},
		{"unknown command", "account", "a1", "close", ``, ErrUnknownCommand},
		{"malformed json", "account", "a1", "deposit", `{"amount": `, ErrBadCommand},
		{"unknown field", "account", "a1", "deposit", `{"amount": 1, "extra": true}`, ErrBadCommand},
		{"wrong type", "account", "a1", "deposit", `{"amount": "ten"}`, ErrBadCommand},
		{"invalid id", "account", "a.1", "open", ``, wire.ErrInvalidToken},
	}
	for _, c := range cases {
		_, err := r.Handle(t.Context(), Request{Type: c.typ, ID: c.id, Kind: c.kind, Payload: json.RawMessage(c.payload)})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	_, err := send(t, r, "a1", "withdraw", `{"amount": 10}`, "")
	var rej *Rejection
	if !errors.As(err, &rej) || rej.Code != "insufficient_funds" {
		t.Errorf("rejection = %v", err)
	}
	if f.msgs(t) != before {
		t.Fatalf("rejected commands wrote %d messages", f.msgs(t)-before)
	}
}

func testConcurrentNodes(t *testing.T, f *fixture) {
	nodes := []*Repository{f.repo(t, Config{}), f.repo(t, Config{})}
	mustSend(t, nodes[0], "hot", "open", ``, "")
	const goroutines, perG = 16, 15
	var ok, conflicts atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			r := nodes[g%2]
			for range perG {
				_, err := r.Handle(t.Context(), Request{Type: "account", ID: "hot", Kind: "deposit", Payload: json.RawMessage(`{"amount":1}`)})
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, ErrConflict):
					conflicts.Add(1)
				default:
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st, err := f.repo(t, Config{}).Get(t.Context(), "account", "hot")
	if err != nil {
		t.Fatal(err)
	}
	acc := st.Value.(account)
	if acc.Balance != ok.Load() {
		t.Fatalf("balance %d but %d deposits acknowledged (%d gave up on conflicts): lost update", acc.Balance, ok.Load(), conflicts.Load())
	}
	if st.Position.Version != uint64(ok.Load())+1 {
		t.Fatalf("version %d, want %d", st.Position.Version, ok.Load()+1)
	}
	recs, err := f.log.Load(t.Context(), "account", "hot", streams.Position{})
	if err != nil {
		t.Fatal(err)
	}
	for i, rec := range recs {
		if rec.FirstVersion() != uint64(i+1) {
			t.Fatalf("record %d has version %d: not contiguous", i, rec.FirstVersion())
		}
	}
	t.Logf("%d deposits, %d gave up, conflicts seen: %d + %d", ok.Load(), conflicts.Load(), nodes[0].Stats().Conflicts, nodes[1].Stats().Conflicts)
}

func testIdempotency(t *testing.T, f *fixture) {
	r := f.repo(t, Config{})
	mustSend(t, r, "a1", "open", ``, "")
	first := mustSend(t, r, "a1", "deposit", `{"amount": 5}`, "key-1")
	before := f.msgs(t)

	again := mustSend(t, r, "a1", "deposit", `{ "amount" : 5 }`, "key-1")
	if !again.Replayed || again.Seq != first.Seq || again.DecisionID != first.DecisionID || again.Version != first.Version {
		t.Fatalf("retry = %+v, want the first result %+v", again, first)
	}
	if _, err := send(t, r, "a1", "deposit", `{"amount": 6}`, "key-1"); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("same key, other body: err = %v", err)
	}
	if _, err := send(t, r, "a1", "withdraw", `{"amount": 5}`, "key-1"); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("same key, other command: err = %v", err)
	}
	// The aggregate moved on; the retry still finds its decision.
	mustSend(t, r, "a1", "deposit", `{"amount": 1}`, "")
	if f.msgs(t) != before+1 {
		t.Fatalf("retries wrote %d messages", f.msgs(t)-before-1)
	}
	// A restarted node (empty cache) still answers from the log.
	restarted := f.repo(t, Config{})
	res := mustSend(t, restarted, "a1", "deposit", `{"amount":5}`, "key-1")
	if !res.Replayed || res.Seq != first.Seq {
		t.Fatalf("after restart: %+v", res)
	}
	// …and from a snapshot that holds the recent decisions.
	snapped := f.repo(t, Config{SnapshotEvery: 1})
	if _, err := snapped.Get(t.Context(), "account", "a1"); err != nil {
		t.Fatal(err)
	}
	fromSnap := f.repo(t, Config{SnapshotEvery: 1})
	res = mustSend(t, fromSnap, "a1", "deposit", `{"amount":5}`, "key-1")
	if !res.Replayed || res.Seq != first.Seq || fromSnap.Stats().SnapshotHits != 1 || fromSnap.Stats().RecordsRead != 0 {
		t.Fatalf("from snapshot: %+v, stats %+v", res, fromSnap.Stats())
	}
}

// TestFoldKeepsOnlyKeyedDecisionsInsideTheHorizon pins what the idempotency
// memory holds: keyed decisions younger than the horizon, nothing else. (Past
// the horizon JetStream's own dedup window, minutes long, has long expired
// too, so a retry would then decide again.)
func TestFoldKeepsOnlyKeyedDecisionsInsideTheHorizon(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	r := NewRepository(nil, nil, nil, Config{IdempotencyHorizon: time.Hour, Now: func() time.Time { return now }}, nil)
	def := accountDef(1)
	e := &entry{state: account{}, oldest: now.Add(-2 * time.Hour), recent: map[string]recentDecision{
		"old":   {Seq: 1, At: now.Add(-2 * time.Hour)},
		"young": {Seq: 2, At: now.Add(-30 * time.Minute)},
	}}
	rec := func(seq uint64, id, key string, at time.Time) streams.Record {
		return streams.Record{Seq: seq, Decision: streams.Decision{ID: id, IdempotencyKey: key, RequestDigest: "d",
			Events: []streams.Event{{Type: "deposited", Version: seq, Time: at, Data: json.RawMessage(`{"amount":1}`)}}}}
	}
	for _, rc := range []streams.Record{rec(3, "keyed", "k", now), rec(4, "unkeyed", "", now), rec(5, "stale", "k2", now.Add(-3*time.Hour))} {
		if err := r.fold(def, e, rc); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := e.recent["old"]; ok {
		t.Error("a decision older than the horizon was kept")
	}
	for _, id := range []string{"young", "keyed"} {
		if _, ok := e.recent[id]; !ok {
			t.Errorf("%s missing from the recent decisions", id)
		}
	}
	for _, id := range []string{"unkeyed", "stale"} {
		if _, ok := e.recent[id]; ok {
			t.Errorf("%s should not be remembered", id)
		}
	}
	if e.pos.Seq != 5 || e.state.(account).Balance != 3 {
		t.Errorf("fold state %+v at %+v", e.state, e.pos)
	}
}

// appendRaw writes n events to the aggregate straight through the log, in
// decisions of per events.
func appendRaw(t *testing.T, f *fixture, id string, n, per int) {
	t.Helper()
	pos, err := f.log.Last(t.Context(), aggRef("account", id))
	if err != nil {
		t.Fatal(err)
	}
	for written := 0; written < n; written += per {
		d := streams.Decision{ID: uuid.NewString(), AggregateType: "account", AggregateID: id}
		for range min(per, n-written) {
			d.Events = append(d.Events, streams.Event{Type: "deposited", Data: json.RawMessage(`{"amount":1}`)})
		}
		rec, err := f.log.Append(t.Context(), d, pos)
		if err != nil {
			t.Fatal(err)
		}
		pos = rec.Position()
	}
}

func testSnapshotLoad(t *testing.T, f *fixture) {
	appendRaw(t, f, "big", 10_000, 10) // 1,000 decisions, 10,000 events
	first := f.repo(t, Config{SnapshotEvery: 500})
	st, err := first.Get(t.Context(), "account", "big")
	if err != nil {
		t.Fatal(err)
	}
	if st.Value.(account).Balance != 10_000 || first.Stats().RecordsRead != 1000 || first.Stats().SnapshotsWritten != 1 {
		t.Fatalf("cold replay: balance %d, stats %+v", st.Value.(account).Balance, first.Stats())
	}
	appendRaw(t, f, "big", 30, 10) // a tail of 3 decisions past the snapshot
	second := f.repo(t, Config{SnapshotEvery: 500})
	st, err = second.Get(t.Context(), "account", "big")
	if err != nil {
		t.Fatal(err)
	}
	stats := second.Stats()
	if st.Value.(account).Balance != 10_030 || st.Position.Version != 10_030 {
		t.Fatalf("state from snapshot = %+v at %+v", st.Value, st.Position)
	}
	if stats.SnapshotHits != 1 || stats.RecordsRead != 3 {
		t.Fatalf("loaded with %d snapshot hits reading %d records, want 1 and the 3-record tail", stats.SnapshotHits, stats.RecordsRead)
	}
	// A command on the snapshot-loaded aggregate continues the versions.
	res := mustSend(t, second, "big", "deposit", `{"amount":1}`, "")
	if res.Version != 10_031 {
		t.Fatalf("version after command = %d", res.Version)
	}
}

func testSnapshotSchema(t *testing.T, f *fixture) {
	appendRaw(t, f, "s1", 300, 10)
	v1 := f.repo(t, Config{SnapshotEvery: 100}, accountDef(1))
	if _, err := v1.Get(t.Context(), "account", "s1"); err != nil {
		t.Fatal(err)
	}
	if v1.Stats().SnapshotsWritten != 1 {
		t.Fatalf("no snapshot written: %+v", v1.Stats())
	}
	// Corrupt what a v1 snapshot would mean for v2: the v2 reader must not trust it.
	v2 := f.repo(t, Config{SnapshotEvery: 100}, accountDef(2))
	st, err := v2.Get(t.Context(), "account", "s1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Value.(account).Balance != 300 || v2.Stats().SnapshotHits != 0 || v2.Stats().RecordsRead != 30 {
		t.Fatalf("schema 2 load: balance %d, stats %+v; want a full replay of 30 records", st.Value.(account).Balance, v2.Stats())
	}
}

func testStaleCache(t *testing.T, f *fixture) {
	a, b := f.repo(t, Config{}), f.repo(t, Config{})
	mustSend(t, a, "x", "open", ``, "")
	mustSend(t, a, "x", "deposit", `{"amount":10}`, "")  // a caches version 2
	mustSend(t, b, "x", "withdraw", `{"amount":10}`, "") // b moves it to 3, balance 0
	// a's cache says balance 10; the append conflicts, a reloads the tail
	// and decides again on the real state: a rejection, not an overdraft.
	_, err := send(t, a, "x", "withdraw", `{"amount":10}`, "")
	var rej *Rejection
	if !errors.As(err, &rej) || rej.Code != "insufficient_funds" {
		t.Fatalf("withdraw on a stale cache: %v", err)
	}
	if a.Stats().Conflicts != 1 || a.Stats().RecordsRead < 1 {
		t.Fatalf("stats %+v: want one conflict and a tail reload", a.Stats())
	}
}

// TestRejectionOnAStaleCacheChecksTheTail: another node moved the aggregate;
// a command this node's cached state would reject (or ignore) is decided
// again on the real state instead of being refused without a write.
func TestRejectionOnAStaleCacheChecksTheTail(t *testing.T) {
	f := newFixture(t, natstest.RunServer(t))
	a, b := f.repo(t, Config{}), f.repo(t, Config{})
	mustSend(t, a, "s1", "open", ``, "")                 // a caches version 1, balance 0
	mustSend(t, b, "s1", "deposit", `{"amount":10}`, "") // b moves it on
	// On a's cached state (balance 0) this is insufficient funds.
	res := mustSend(t, a, "s1", "withdraw", `{"amount":10}`, "")
	if res.Version != 3 {
		t.Fatalf("withdraw decided on the stale cache: %+v", res)
	}
}

// TestAColdLoadIsNotReadAgainAtOnce: loading an aggregate that is not
// cached reads its tail from the log; a state read or a rejection right
// after that load need not read the tail a second time (one round trip,
// not two), while a cached aggregate still checks its tail once.
func TestAColdLoadIsNotReadAgainAtOnce(t *testing.T) {
	f := newFixture(t, natstest.RunServer(t))
	mustSend(t, f.repo(t, Config{}), "c1", "open", ``, "")

	r := f.repo(t, Config{}) // a restarted node: nothing cached
	if _, err := r.Get(t.Context(), "account", "c1"); err != nil {
		t.Fatal(err)
	}
	if n := r.Stats().TailReads; n != 1 {
		t.Fatalf("a cold state read read the tail %d times, want 1", n)
	}
	if _, err := r.Get(t.Context(), "account", "c1"); err != nil {
		t.Fatal(err)
	}
	if n := r.Stats().TailReads; n != 2 {
		t.Fatalf("a cached state read: %d tail reads in all, want 2 (it checks the tail once)", n)
	}

	r = f.repo(t, Config{})
	if _, err := send(t, r, "c1", "withdraw", `{"amount":10}`, ""); !errors.Is(err, ErrRejected) {
		t.Fatalf("withdraw from an empty account: %v", err)
	}
	if n := r.Stats().TailReads; n != 1 {
		t.Fatalf("a rejection on a cold load read the tail %d times, want 1", n)
	}
}

// TestCommandsWithoutAnOutcomeHandlerAreNotAwaited: deposit issues notify
// with Report, but account registers neither notify_done nor
// notify_failed, so no outcome of it can ever be admitted. Such commands
// must not be kept as outstanding: they were never removed, and the set
// (in the cache and in every snapshot) grew by one with each deposit.
func TestCommandsWithoutAnOutcomeHandlerAreNotAwaited(t *testing.T) {
	f := newFixture(t, natstest.RunServer(t))
	r := f.repo(t, Config{SnapshotEvery: 2})
	mustSend(t, r, "n1", "open", ``, "")
	for range 5 {
		mustSend(t, r, "n1", "deposit", `{"amount":1}`, "")
	}
	for name, repo := range map[string]*Repository{"cached": r, "replayed": f.repo(t, Config{SnapshotEvery: -1}), "from a snapshot": f.repo(t, Config{SnapshotEvery: 2})} {
		e, _, err := repo.get(t.Context(), repo.reg.defs["account"], aggRef("account", "n1"))
		if err != nil {
			t.Fatal(err)
		}
		if len(e.outstanding) != 0 {
			t.Fatalf("%s: %d commands awaited that no outcome can answer: %v", name, len(e.outstanding), e.outstanding)
		}
	}
	// The worker's report is refused saying what to change.
	_, err := r.HandleOutcome(t.Context(), Request{Type: "account", ID: "n1", Kind: DoneKind("notify"), Payload: json.RawMessage(`{"command_id":"account:n1:2:0"}`)})
	if !errors.Is(err, ErrUnknownCommand) || !IsPermanent(err) || !strings.Contains(err.Error(), "Decision.Fire") {
		t.Fatalf("report of notify: %v, want ErrUnknownCommand saying to use Decision.Fire", err)
	}
}

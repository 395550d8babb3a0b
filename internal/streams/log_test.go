package streams

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/wire"
)

// harness is one namespace on a running server (R1 or R3), provisioned.
type harness struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	log      *Log
	ns       string
	replicas int
}

type mkHarness func(t *testing.T, cfg Config) *harness

func provisioned(servers []*server.Server, replicas int) mkHarness {
	return func(t *testing.T, cfg Config) *harness {
		t.Helper()
		// Spread clients over the members so R3 cases see followers too.
		s := servers[rand.IntN(len(servers))]
		nc, js := natstest.Connect(t, s)
		ns := natstest.Namespace(t)
		pc := ProvisionConfig{Replicas: replicas, MaxMessageSize: 64 << 10}
		if _, err := Provision(t.Context(), js, ns, pc, nil); err != nil {
			t.Fatalf("provision: %v", err)
		}
		if cfg.MaxMessageSize == 0 {
			cfg.MaxMessageSize = 64 << 10
		}
		l, err := Open(t.Context(), js, ns, cfg, nil)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return &harness{nc: nc, js: js, log: l, ns: ns, replicas: replicas}
	}
}

// TestLogContractR1 and TestLogContractR3 run the same contract against a
// single server and a three-node cluster.
func TestLogContractR1(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	runContract(t, provisioned([]*server.Server{s}, 1))
}

func TestLogContractR3(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Log("short mode: the R3 contract still runs, with fewer aggregates")
	}
	servers := natstest.RunCluster(t)
	runContract(t, provisioned(servers, 3))
}

func runContract(t *testing.T, mk mkHarness) {
	t.Run("append and load round trip", func(t *testing.T) { t.Parallel(); testRoundTrip(t, mk(t, Config{})) })
	t.Run("stale position conflicts and carries the actual position", func(t *testing.T) { t.Parallel(); testStaleConflict(t, mk(t, Config{})) })
	t.Run("two concurrent appenders: exactly one wins", func(t *testing.T) { t.Parallel(); testConcurrentAppenders(t, mk(t, Config{})) })
	t.Run("retry after a lost reply returns the original", func(t *testing.T) { t.Parallel(); testRetryLostReply(t, mk(t, Config{})) })
	t.Run("retry after a lost reply and a later append", func(t *testing.T) { t.Parallel(); testRetryAfterLaterAppend(t, mk(t, Config{})) })
	t.Run("timed-out attempts resolve on retry", func(t *testing.T) { t.Parallel(); testTimedOutAppend(t, mk) })
	t.Run("1000 aggregates from 8 goroutines have contiguous versions", func(t *testing.T) { t.Parallel(); testManyAggregates(t, mk(t, Config{})) })
	t.Run("invalid input writes nothing", func(t *testing.T) { t.Parallel(); testInvalidInput(t, mk(t, Config{})) })
	t.Run("load after a position returns only the tail", func(t *testing.T) { t.Parallel(); testLoadTail(t, mk(t, Config{LoadBatch: 7})) })
	t.Run("upcaster applies on every read", func(t *testing.T) { t.Parallel(); testUpcast(t, mk) })
	t.Run("read the whole log from a global position", func(t *testing.T) { t.Parallel(); testReadFrom(t, mk(t, Config{LoadBatch: 5})) })
}

func decision(typ, id string, eventTypes ...string) Decision {
	d := Decision{ID: uuid.Must(uuid.NewV7()).String(), AggregateType: typ, AggregateID: id, CorrelationID: "corr-1"}
	for i, et := range eventTypes {
		d.Events = append(d.Events, Event{Type: et, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
	}
	return d
}

func msgCount(t *testing.T, h *harness) uint64 {
	t.Helper()
	st, err := h.js.Stream(t.Context(), h.log.Names().Events)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	return st.CachedInfo().State.Msgs
}

func mustAppend(t *testing.T, h *harness, d Decision, after Position) Record {
	t.Helper()
	rec, err := h.log.Append(t.Context(), d, after)
	if err != nil {
		t.Fatalf("append %s/%s at %+v: %v", d.AggregateType, d.AggregateID, after, err)
	}
	return rec
}

func testRoundTrip(t *testing.T, h *harness) {
	ctx := t.Context()
	d1 := decision("trip", "t1", "trip_requested")
	d1.Commands = []Command{{Kind: "lock_budget", Payload: json.RawMessage(`{"amount":100}`), Report: true}}
	r1 := mustAppend(t, h, d1, Position{})
	if r1.FirstVersion() != 1 || r1.LastVersion() != 1 {
		t.Fatalf("first decision versions = %d..%d, want 1..1", r1.FirstVersion(), r1.LastVersion())
	}
	if got, want := r1.Commands[0].ID, "trip:t1:1:0"; got != want {
		t.Fatalf("command id = %q, want %q", got, want)
	}
	d2 := decision("trip", "t1", "budget_locked", "flight_requested", "hotel_requested")
	d2.Commands = []Command{{Kind: "book_flight"}, {Kind: "book_hotel", DeliverAfter: time.Now().Add(time.Hour)}}
	r2 := mustAppend(t, h, d2, r1.Position())
	if r2.FirstVersion() != 2 || r2.LastVersion() != 4 || r2.Seq <= r1.Seq {
		t.Fatalf("second decision = seq %d versions %d..%d", r2.Seq, r2.FirstVersion(), r2.LastVersion())
	}
	if r2.Commands[0].ID != "trip:t1:4:0" || r2.Commands[1].ID != "trip:t1:4:1" {
		t.Fatalf("command ids = %q %q", r2.Commands[0].ID, r2.Commands[1].ID)
	}

	recs, err := h.log.Load(ctx, "trip", "t1", Position{}, AtLeast(r2.Seq))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if len(recs) != 2 {
		t.Fatalf("loaded %d records, want 2", len(recs))
	}
	for i, want := range []Record{r1, r2} {
		got := recs[i]
		if got.Seq != want.Seq || got.ID != want.ID || len(got.Events) != len(want.Events) || len(got.Commands) != len(want.Commands) {
			t.Fatalf("record %d = %+v, want %+v", i, got, want)
		}
		for j := range got.Events {
			ge, we := got.Events[j], want.Events[j]
			if ge.ID != we.ID || ge.Type != we.Type || ge.Version != we.Version || !ge.Time.Equal(we.Time) || string(ge.Data) != string(we.Data) || ge.Schema != 1 {
				t.Fatalf("record %d event %d = %+v, want %+v", i, j, ge, we)
			}
		}
		for j := range got.Commands {
			if got.Commands[j].ID != want.Commands[j].ID || got.Commands[j].Report != want.Commands[j].Report || !got.Commands[j].DeliverAfter.Equal(want.Commands[j].DeliverAfter) {
				t.Fatalf("record %d command %d = %+v, want %+v", i, j, got.Commands[j], want.Commands[j])
			}
		}
		if got.Stored.IsZero() || got.CorrelationID != "corr-1" {
			t.Fatalf("record %d: stored %v correlation %q", i, got.Stored, got.CorrelationID)
		}
	}

	// The headers make the message readable without decoding the payload.
	st, err := h.js.Stream(ctx, h.log.Names().Events)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetMsg(ctx, r2.Seq)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		jetstream.MsgIDHeader: d2.ID,
		wire.HeaderEventTypes: "budget_locked,flight_requested,hotel_requested", wire.HeaderFirstVersion: "2",
		wire.HeaderLastVersion: "4", wire.HeaderCommandCount: "2", wire.HeaderCorrelationID: "corr-1", wire.HeaderEnvelope: "1",
	} {
		if got := raw.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if raw.Subject != h.ns+".evt.trip.t1" {
		t.Errorf("subject = %q", raw.Subject)
	}
	natstest.Eventually(t, 5*time.Second, func() bool { // a follower may lag on R3
		p, err := h.log.Last(ctx, aggRef("trip", "t1"))
		return err == nil && p == r2.Position()
	})
	if p, err := h.log.Last(ctx, aggRef("trip", "nobody")); err != nil || p != (Position{}) {
		t.Errorf("Last of a new aggregate = %+v, %v; want zero", p, err)
	}
}

func testStaleConflict(t *testing.T, h *harness) {
	r1 := mustAppend(t, h, decision("acct", "a1", "opened"), Position{})
	r2 := mustAppend(t, h, decision("acct", "a1", "deposited"), r1.Position())
	before := msgCount(t, h)

	_, err := h.log.Append(t.Context(), decision("acct", "a1", "withdrawn"), r1.Position())
	var ce *ConflictError
	if !errors.Is(err, ErrVersionConflict) || !errors.As(err, &ce) {
		t.Fatalf("append at a stale position: err = %v, want a *ConflictError", err)
	}
	if ce.Actual != r2.Position() || ce.Expected != r1.Position() {
		t.Fatalf("conflict expected %+v actual %+v, want expected %+v actual %+v", ce.Expected, ce.Actual, r1.Position(), r2.Position())
	}
	// A new aggregate's expectation (zero) against an existing one conflicts too.
	if _, err := h.log.Append(t.Context(), decision("acct", "a1", "opened"), Position{}); !errors.Is(err, ErrVersionConflict) {
		t.Fatalf("append at zero to an existing aggregate: err = %v", err)
	}
	if after := msgCount(t, h); after != before {
		t.Fatalf("conflicting appends wrote %d messages", after-before)
	}
}

func testConcurrentAppenders(t *testing.T, h *harness) {
	for round := range 10 {
		id := fmt.Sprintf("race%d", round)
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, 2)
		recs := make([]Record, 2)
		for i := range 2 {
			wg.Go(func() {
				<-start
				recs[i], errs[i] = h.log.Append(t.Context(), decision("order", id, "placed"), Position{})
			})
		}
		close(start)
		wg.Wait()
		wins, conflicts := 0, 0
		var won Record
		for i, err := range errs {
			switch {
			case err == nil:
				wins++
				won = recs[i]
			case errors.Is(err, ErrVersionConflict):
				conflicts++
			default:
				t.Fatalf("round %d: unexpected error %v", round, err)
			}
		}
		if wins != 1 || conflicts != 1 {
			t.Fatalf("round %d: %d wins, %d conflicts; want exactly one of each", round, wins, conflicts)
		}
		stored, err := h.log.Load(t.Context(), "order", id, Position{}, AtLeast(won.Seq))
		if err != nil || len(stored) != 1 {
			t.Fatalf("round %d: %d records stored (%v), want 1", round, len(stored), err)
		}
	}
}

// publishWithoutReply stores d the way Append would but never reads the ack:
// a reply lost on the way back.
func publishWithoutReply(t *testing.T, h *harness, d Decision, after Position, now time.Time) Record {
	t.Helper()
	subject, err := h.log.Names().AggregateSubject(d.AggregateType, d.AggregateID)
	if err != nil {
		t.Fatal(err)
	}
	p, err := prepare(d, after, now)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := encode(subject, p)
	if err != nil {
		t.Fatal(err)
	}
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, fmt.Sprint(after.Seq))
	before := msgCount(t, h)
	if err := h.nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	var recs []Record
	natstest.Eventually(t, 5*time.Second, func() bool {
		var err error
		recs, err = h.log.Load(t.Context(), d.AggregateType, d.AggregateID, after)
		return err == nil && len(recs) > 0
	})
	if msgCount(t, h) != before+1 {
		t.Fatal("the unacknowledged publish was not stored once")
	}
	return recs[0]
}

func testRetryLostReply(t *testing.T, h *harness) {
	r1 := mustAppend(t, h, decision("cart", "c1", "created"), Position{})
	d := decision("cart", "c1", "item_added", "item_added")
	d.Commands = []Command{{Kind: "reserve_stock"}}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	stored := publishWithoutReply(t, h, d, r1.Position(), t0)
	before := msgCount(t, h)

	got := mustAppend(t, h, d, r1.Position()) // the client's retry
	if got.Seq != stored.Seq || got.ID != d.ID || got.LastVersion() != 3 {
		t.Fatalf("retry = seq %d id %s version %d; want the original seq %d", got.Seq, got.ID, got.LastVersion(), stored.Seq)
	}
	if !got.Events[0].Time.Equal(t0) {
		t.Fatalf("retry returned event time %v, want the original %v", got.Events[0].Time, t0)
	}
	if got.Commands[0].ID != "cart:c1:3:0" {
		t.Fatalf("command id %q", got.Commands[0].ID)
	}
	if after := msgCount(t, h); after != before {
		t.Fatalf("retry stored %d new messages", after-before)
	}
}

func testRetryAfterLaterAppend(t *testing.T, h *harness) {
	d := decision("cart", "c2", "created")
	stored := publishWithoutReply(t, h, d, Position{}, time.Now())
	r2 := mustAppend(t, h, decision("cart", "c2", "item_added"), stored.Position())
	before := msgCount(t, h)

	got := mustAppend(t, h, d, Position{}) // the retry comes after someone else's append
	if got.Seq != stored.Seq {
		t.Fatalf("retry = seq %d, want original %d (latest is %d)", got.Seq, stored.Seq, r2.Seq)
	}
	if msgCount(t, h) != before {
		t.Fatal("retry stored a new message")
	}
}

func testTimedOutAppend(t *testing.T, mk mkHarness) {
	h := mk(t, Config{AppendTimeout: time.Nanosecond, AppendAttempts: 2})
	d := decision("slow", "s1", "happened")
	rec, err := h.log.Append(t.Context(), d, Position{})
	if err != nil && !errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("append with every attempt timing out: %v, want success or ErrUnknownOutcome", err)
	}
	// Whatever happened, a retry with a working timeout converges on one copy.
	l, err2 := Open(t.Context(), h.js, h.ns, Config{MaxMessageSize: 64 << 10}, nil)
	if err2 != nil {
		t.Fatal(err2)
	}
	again, err := l.Append(t.Context(), d, Position{})
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if rec.Seq != 0 && rec.Seq != again.Seq {
		t.Fatalf("retry seq %d differs from the first outcome %d", again.Seq, rec.Seq)
	}
	recs, err := l.Load(t.Context(), "slow", "s1", Position{}, AtLeast(again.Seq))
	if err != nil || len(recs) != 1 {
		t.Fatalf("stored %d copies (%v), want 1", len(recs), err)
	}
}

func testManyAggregates(t *testing.T, h *harness) {
	const aggregates, workers = 1000, 8
	appendsPer := 3
	if testing.Short() || h.replicas > 1 {
		appendsPer = 2
	}
	ctx := t.Context()
	var mu sync.Mutex
	committed := map[string]int{}
	lastSeq := map[string]uint64{}
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			// Every worker visits every aggregate, in its own order, so
			// workers collide on aggregates and must handle conflicts.
			order := rng.Perm(aggregates)
			for _, a := range order {
				id := fmt.Sprintf("a%d", a)
				if rng.IntN(workers) >= appendsPer {
					continue
				}
				for {
					pos, err := h.log.Last(ctx, aggRef("acct", id))
					if err != nil {
						errc <- err
						return
					}
					rec, err := h.log.Append(ctx, decision("acct", id, "touched"), pos)
					if errors.Is(err, ErrVersionConflict) {
						continue
					}
					if err != nil {
						errc <- err
						return
					}
					mu.Lock()
					committed[id]++
					lastSeq[id] = max(lastSeq[id], rec.Seq)
					mu.Unlock()
					break
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	total := 0
	for a := range aggregates {
		id := fmt.Sprintf("a%d", a)
		recs, err := h.log.Load(ctx, "acct", id, Position{}, AtLeast(lastSeq[id]))
		if err != nil {
			t.Fatalf("load %s: %v", id, err)
		}
		if len(recs) != committed[id] {
			t.Fatalf("%s: %d records stored, %d appends acknowledged", id, len(recs), committed[id])
		}
		for i, r := range recs {
			if r.FirstVersion() != uint64(i+1) {
				t.Fatalf("%s: record %d has version %d", id, i, r.FirstVersion())
			}
		}
		total += len(recs)
	}
	if got := msgCount(t, h); got != uint64(total) {
		t.Fatalf("stream holds %d messages, acknowledged %d", got, total)
	}
	t.Logf("%d appends over %d aggregates", total, aggregates)
}

func testInvalidInput(t *testing.T, h *harness) {
	ctx := t.Context()
	bad := []string{"a.b", "*", ">", "", "with space", strings.Repeat("x", 300), "tab\t", "uni\u00e9"}
	for _, tok := range bad {
		for _, d := range []Decision{
			decision(tok, "ok", "e"),
			decision("ok", tok, "e"),
			decision("ok", "ok", tok),
			func() Decision {
				d := decision("ok", "ok", "e")
				d.Commands = []Command{{Kind: tok}}
				return d
			}(),
		} {
			_, err := h.log.Append(ctx, d, Position{})
			var te *wire.TokenError
			if !errors.As(err, &te) || !errors.Is(err, wire.ErrInvalidToken) {
				t.Errorf("token %q: err = %v, want a *wire.TokenError", tok, err)
				continue
			}
			if !strings.Contains(err.Error(), "A-Z a-z 0-9 _ -") {
				t.Errorf("token %q: error %q does not say what is valid", tok, err)
			}
		}
	}
	big := decision("ok", "big", "e")
	big.Events[0].Data = json.RawMessage(`"` + strings.Repeat("x", 70<<10) + `"`)
	_, err := h.log.Append(ctx, big, Position{})
	var se *SizeError
	if !errors.As(err, &se) || se.Limit != 64<<10 || se.Size < 70<<10 {
		t.Errorf("oversized decision: err = %v, want a *SizeError with size and limit", err)
	}
	for name, d := range map[string]Decision{
		"no events":       {ID: uuid.NewString(), AggregateType: "ok", AggregateID: "ok"},
		"bad id":          {ID: "not-a-uuid", AggregateType: "ok", AggregateID: "ok", Events: []Event{{Type: "e"}}},
		"bad json":        {ID: uuid.NewString(), AggregateType: "ok", AggregateID: "ok", Events: []Event{{Type: "e", Data: json.RawMessage(`{`)}}},
		"bad cmd json":    {ID: uuid.NewString(), AggregateType: "ok", AggregateID: "ok", Events: []Event{{Type: "e"}}, Commands: []Command{{Kind: "k", Payload: json.RawMessage(`nope`)}}},
		"negative schema": {ID: uuid.NewString(), AggregateType: "ok", AggregateID: "ok", Events: []Event{{Type: "e", Schema: -1}}},
	} {
		if _, err := h.log.Append(ctx, d, Position{}); !errors.Is(err, ErrInvalidDecision) {
			t.Errorf("%s: err = %v, want ErrInvalidDecision", name, err)
		}
	}
	if _, err := h.log.Append(ctx, decision("ok", "ok", "e"), Position{Version: 3}); !errors.Is(err, ErrInvalidDecision) {
		t.Errorf("version without sequence: err = %v", err)
	}
	if _, err := h.log.Load(ctx, "a.b", "x", Position{}); !errors.Is(err, wire.ErrInvalidToken) {
		t.Errorf("load with an invalid type: err = %v", err)
	}
	if n := msgCount(t, h); n != 0 {
		t.Fatalf("invalid input stored %d messages", n)
	}
}

func testLoadTail(t *testing.T, h *harness) {
	var pos Position
	var recs []Record
	for i := range 25 {
		r := mustAppend(t, h, decision("doc", "d1", fmt.Sprintf("edited%d", i)), pos)
		pos = r.Position()
		recs = append(recs, r)
		// Interleave another aggregate so the subject filter matters.
		mustAppend(t, h, decision("doc", fmt.Sprintf("other%d", i), "edited"), Position{})
	}
	all, err := h.log.Load(t.Context(), "doc", "d1", Position{}, AtLeast(pos.Seq))
	if err != nil || len(all) != 25 {
		t.Fatalf("full load: %d records, %v", len(all), err)
	}
	tail, err := h.log.Load(t.Context(), "doc", "d1", recs[19].Position())
	if err != nil {
		t.Fatal(err)
	}
	if len(tail) != 5 || tail[0].Seq != recs[20].Seq || tail[0].FirstVersion() != 21 {
		t.Fatalf("tail after version 20: %d records starting at %+v", len(tail), tail)
	}
	none, err := h.log.Load(t.Context(), "doc", "d1", pos)
	if err != nil || len(none) != 0 {
		t.Fatalf("load after the last position: %d records, %v", len(none), err)
	}
	if _, err := h.log.Load(t.Context(), "doc", "d1", Position{Seq: recs[19].Seq, Version: 3}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("load with an inconsistent position: err = %v, want ErrCorrupt", err)
	}
}

func testUpcast(t *testing.T, mk mkHarness) {
	calls := 0
	var mu sync.Mutex
	h := mk(t, Config{Upcast: func(typ string, e Event) (Event, error) {
		mu.Lock()
		calls++
		mu.Unlock()
		if e.Type == "renamed" && e.Schema == 1 {
			var v1 struct{ Name string }
			if err := json.Unmarshal(e.Data, &v1); err != nil {
				return e, err
			}
			parts := strings.SplitN(v1.Name, " ", 2)
			e.Data, _ = json.Marshal(map[string]string{"first": parts[0], "last": parts[1]})
			e.Schema = 2
		}
		return e, nil
	}})
	d := decision("person", "p1", "renamed")
	d.Events[0].Data = json.RawMessage(`{"Name":"Ada Lovelace"}`)
	rec := mustAppend(t, h, d, Position{})
	recs, err := h.log.Load(t.Context(), "person", "p1", Position{}, AtLeast(rec.Seq))
	if err != nil || len(recs) != 1 {
		t.Fatalf("load: %v", err)
	}
	e := recs[0].Events[0]
	if e.Schema != 2 || string(e.Data) != `{"first":"Ada","last":"Lovelace"}` {
		t.Fatalf("upcast event = schema %d %s", e.Schema, e.Data)
	}
	var all []Record
	natstest.Eventually(t, 5*time.Second, func() bool {
		all, err = h.log.ReadFrom(t.Context(), 0, 0)
		return err == nil && len(all) == 1
	})
	if all[0].Events[0].Schema != 2 {
		t.Fatalf("ReadFrom did not upcast: %+v %v", all, err)
	}
	if calls < 2 {
		t.Fatalf("upcaster called %d times", calls)
	}
}

func testReadFrom(t *testing.T, h *harness) {
	var seqs []uint64
	pos := map[int]Position{}
	for i := range 12 {
		r := mustAppend(t, h, decision("item", fmt.Sprintf("i%d", i%4), "made"), pos[i%4])
		pos[i%4] = r.Position()
		seqs = append(seqs, r.Seq)
	}
	var all []Record
	natstest.Eventually(t, 5*time.Second, func() bool { // a follower may lag on R3
		var err error
		all, err = h.log.ReadFrom(t.Context(), 0, 0)
		return err == nil && len(all) == 12
	})
	for i, r := range all {
		if r.Seq != seqs[i] {
			t.Fatalf("record %d seq %d, want %d", i, r.Seq, seqs[i])
		}
	}
	page, err := h.log.ReadFrom(t.Context(), seqs[3], 6)
	if err != nil || len(page) != 6 || page[0].Seq != seqs[3] || page[5].Seq != seqs[8] {
		t.Fatalf("page from %d: %d records %v", seqs[3], len(page), err)
	}
	end, err := h.log.ReadFrom(t.Context(), seqs[11]+1, 0)
	if err != nil || len(end) != 0 {
		t.Fatalf("read past the end: %d, %v", len(end), err)
	}
}

package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/outbox"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// rcEnv is one provisioned scratch namespace with its log.
type rcEnv struct {
	t     *testing.T
	js    jetstream.JetStream
	ns    string
	names streams.Names
	log   *streams.Log
	pos   map[string]streams.Position
}

func newRCEnv(t *testing.T, s *server.Server, pc streams.ProvisionConfig) *rcEnv {
	t.Helper()
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	if _, err := streams.Provision(t.Context(), js, ns, pc, nil); err != nil {
		t.Fatalf("provision: %v", err)
	}
	l, err := streams.Open(t.Context(), js, ns, streams.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &rcEnv{t: t, js: js, ns: ns, names: streams.NamesFor(ns), log: l, pos: map[string]streams.Position{}}
}

// decide appends a decision of trip/<id> issuing cmds.
func (e *rcEnv) decide(id string, cmds ...streams.Command) streams.Record {
	e.t.Helper()
	rec, err := e.log.Append(e.t.Context(), streams.Decision{
		ID: uuid.NewString(), AggregateType: "trip", AggregateID: id,
		Events: []streams.Event{{Type: "happened"}}, Commands: cmds,
	}, e.pos[id])
	if err != nil {
		e.t.Fatalf("append trip/%s: %v", id, err)
	}
	e.pos[id] = rec.Position()
	return rec
}

// publish stores command i of rec in OUTBOX as the relay would.
func (e *rcEnv) publish(rec streams.Record, i int) *jetstream.PubAck {
	e.t.Helper()
	ack, err := e.js.PublishMsg(e.t.Context(), wire.EncodeCommand(e.ns, rec, rec.Commands[i], time.Now()))
	if err != nil {
		e.t.Fatalf("publish %s: %v", rec.Commands[i].ID, err)
	}
	return ack
}

// ackRelay creates the relay's consumer (as the relay does) and acks every
// decision up to seq, as if the relay had relayed them.
func (e *rcEnv) ackRelay(seq uint64) {
	e.t.Helper()
	ctx := e.t.Context()
	cons, err := e.js.CreateOrUpdateConsumer(ctx, e.names.Events, outbox.RelayConsumerConfig(e.names, outbox.RelayConfig{}))
	if err != nil {
		e.t.Fatal(err)
	}
	for {
		// Ask for exactly what is pending: a fetch returns as soon as its
		// batch is full. The server counts pending messages as the
		// consumer is signalled of them: poll for some.
		var n int
		for deadline := time.Now().Add(10 * time.Second); n == 0; {
			info, err := cons.Info(ctx)
			if err != nil {
				e.t.Fatal(err)
			}
			if n = min(int(info.NumPending), 100); n == 0 {
				if time.Now().After(deadline) {
					e.t.Fatalf("relay consumer: nothing left to fetch before seq %d", seq)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		batch, err := cons.Fetch(n, jetstream.FetchPriorityGroup(outbox.PriorityGroup), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			e.t.Fatal(err)
		}
		var last jetstream.Msg
		for m := range batch.Messages() {
			if md, _ := m.Metadata(); md.Sequence.Stream > seq {
				_ = m.Nak()
				continue
			}
			if err := m.DoubleAck(ctx); err != nil { // the relay acks each decision
				e.t.Fatal(err)
			}
			last = m
		}
		if last == nil {
			e.t.Fatalf("relay consumer: nothing left to fetch before seq %d", seq)
		}
		if md, _ := last.Metadata(); md.Sequence.Stream >= seq {
			return
		}
	}
}

func (e *rcEnv) putReceipt(id, kind, outcome string) {
	e.t.Helper()
	kv, err := e.js.KeyValue(e.t.Context(), e.names.Receipts)
	if err != nil {
		e.t.Fatal(err)
	}
	data, _ := json.Marshal(wire.Receipt{CommandID: id, Kind: kind, Outcome: outcome, Attempts: 1, At: time.Now()})
	if _, err := kv.Put(e.t.Context(), wire.ReceiptKey(id), data); err != nil {
		e.t.Fatal(err)
	}
}

// deadLetter stores rec's command i in the DLQ as a worker would.
func (e *rcEnv) deadLetter(rec streams.Record, i int, reason string) {
	e.t.Helper()
	m := wire.EncodeCommand(e.ns, rec, rec.Commands[i], time.Now())
	m.Subject = wire.DeadLetterSubject(e.ns, rec.Commands[i].Kind, rec.Seq*1000+uint64(i))
	m.Header.Del(jetstream.MsgIDHeader)
	m.Header.Set(wire.HeaderError, reason)
	m.Header.Set(wire.HeaderAttempts, "5")
	m.Header.Set(wire.HeaderWorker, "node-1")
	if _, err := e.js.PublishMsg(e.t.Context(), m); err != nil {
		e.t.Fatal(err)
	}
}

func (e *rcEnv) outboxMsgs() uint64 {
	e.t.Helper()
	st, err := e.js.Stream(e.t.Context(), e.names.Outbox)
	if err != nil {
		e.t.Fatal(err)
	}
	return st.CachedInfo().State.Msgs
}

func (e *rcEnv) run(cfg ReconcileConfig) Report {
	e.t.Helper()
	rep, err := NewReconciler(e.js, e.ns, cfg, nil).Run(e.t.Context(), nil)
	if err != nil {
		e.t.Fatalf("reconcile: %v", err)
	}
	return rep
}

// rcStartRelay runs a real relay until the test ends (or stop is called).
func rcStartRelay(t *testing.T, js jetstream.JetStream, ns string) (stop func()) {
	t.Helper()
	r, err := outbox.NewRelay(t.Context(), js, ns, outbox.RelayConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once bool
	stop = func() {
		if once {
			return
		}
		once = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// rcWaitRelayed waits until the relay's ack floor reaches seq.
func rcWaitRelayed(t *testing.T, js jetstream.JetStream, names streams.Names, seq uint64) {
	t.Helper()
	natstest.Eventually(t, 10*time.Second, func() bool {
		c, err := js.Consumer(t.Context(), names.Events, wire.RelayConsumerName)
		return err == nil && c.CachedInfo().AckFloor.Stream >= seq
	})
}

func rcIDs[T any](list []T, id func(T) string) []string {
	out := make([]string, len(list))
	for i, v := range list {
		out[i] = id(v)
	}
	return out
}

func TestReconcileCleanStateHasNoDriftAndCountsPerKind(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	rcStartRelay(t, e.js, e.ns)
	var last streams.Record
	for i := range 5 {
		last = e.decide(fmt.Sprintf("t%d", i), streams.Command{Kind: "book_flight"}, streams.Command{Kind: "book_hotel"})
	}
	e.decide("quiet") // no commands
	last = e.decide("later", streams.Command{Kind: "remind", DeliverAfter: time.Now().Add(time.Hour)})
	rcWaitRelayed(t, e.js, e.names, last.Seq)
	natstest.Eventually(t, 10*time.Second, func() bool { return e.outboxMsgs() == 11 })

	var calls int
	var lastDone, lastTotal uint64
	rep, err := NewReconciler(e.js, e.ns, ReconcileConfig{Batch: 3}, nil).Run(t.Context(), func(done, total uint64) {
		calls++
		if done < lastDone || done > total {
			t.Errorf("progress went %d/%d after %d/%d", done, total, lastDone, lastTotal)
		}
		lastDone, lastTotal = done, total
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Drift() != 0 {
		t.Fatalf("drift %d on a clean state: %+v", rep.Drift(), rep)
	}
	flight := Counts{Issued: 5, InOutbox: 5, InFlight: 5}
	remind := Counts{Issued: 1, InOutbox: 1, Scheduled: 1}
	want := map[string]Counts{"book_flight": flight, "book_hotel": flight, "remind": remind}
	if fmt.Sprint(rep.Kinds) != fmt.Sprint(want) {
		t.Fatalf("kinds:\n got %+v\nwant %+v", rep.Kinds, want)
	}
	if rep.Totals != (Counts{Issued: 11, InOutbox: 11, InFlight: 10, Scheduled: 1}) {
		t.Fatalf("totals %+v", rep.Totals)
	}
	if !rep.RelayConsumer || rep.RelayAckFloor != last.Seq || rep.EventsLastSeq != last.Seq {
		t.Fatalf("relay consumer %v, ack floor %d, log at %d; want floor = log = %d", rep.RelayConsumer, rep.RelayAckFloor, rep.EventsLastSeq, last.Seq)
	}
	if rep.Scanned.Events != last.Seq || rep.Scanned.Outbox != 11 {
		t.Fatalf("scanned %+v", rep.Scanned)
	}
	if calls < 2 || lastDone != lastTotal || lastDone != last.Seq+11 {
		t.Fatalf("progress: %d calls, last %d/%d, want %d", calls, lastDone, lastTotal, last.Seq+11)
	}
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil || back.StuckAfter != 15*time.Minute || back.Totals != rep.Totals {
		t.Fatalf("JSON round trip: %v\n%s", err, data)
	}
}

// TestReconcileReportsExactlyThePlantedDrift plants every kind of state in a
// scratch namespace by hand — relayed, deleted, never published, duplicated,
// done, dead, scheduled, not yet relayed — and checks each lands where it
// should, and that Repair re-publishes what it can with the original ids.
func TestReconcileReportsExactlyThePlantedDrift(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	ctx := t.Context()
	flight, hotel := streams.Command{Kind: "book_flight"}, streams.Command{Kind: "book_hotel"}

	a := e.decide("a", flight, hotel)                                                                  // a:0 done, a:1 dead
	b := e.decide("b", flight)                                                                         // deleted from OUTBOX → orphan
	c := e.decide("c", flight)                                                                         // published twice → duplicate
	d := e.decide("d", hotel)                                                                          // in flight
	sch := e.decide("e", streams.Command{Kind: "book_hotel", DeliverAfter: time.Now().Add(time.Hour)}) // pending schedule
	e.decide("f")                                                                                      // no commands
	g := e.decide("g", flight)                                                                         // never published → orphan
	for _, rec := range []streams.Record{a, b, c, d, sch} {
		for i := range rec.Commands {
			e.publish(rec, i)
		}
	}
	e.ackRelay(g.Seq)
	h := e.decide("h", flight) // after the ack floor: not yet relayed, not an orphan

	st, err := e.js.Stream(ctx, e.names.Outbox)
	if err != nil {
		t.Fatal(err)
	}
	// Find b's message and delete it (OUTBOX allows deletes).
	var bSeq uint64
	for seq := uint64(1); seq <= st.CachedInfo().State.LastSeq; seq++ {
		if m, err := st.GetMsg(ctx, seq); err == nil && m.Header.Get(wire.HeaderCommandID) == b.Commands[0].ID {
			bSeq = seq
		}
	}
	if bSeq == 0 {
		t.Fatal("b's command not in OUTBOX")
	}
	if err := st.DeleteMsg(ctx, bSeq); err != nil {
		t.Fatal(err)
	}
	// A re-drive stores c's command again under another Msg-Id.
	dup := wire.EncodeCommand(e.ns, c, c.Commands[0], time.Now())
	dup.Header.Set(jetstream.MsgIDHeader, "redrive-"+uuid.NewString())
	if _, err := e.js.PublishMsg(ctx, dup); err != nil {
		t.Fatal(err)
	}
	e.putReceipt(a.Commands[0].ID, "book_flight", wire.OutcomeDone)
	e.putReceipt(a.Commands[1].ID, "book_hotel", wire.OutcomeFailed)
	e.deadLetter(a, 1, "hotel closed")

	rep := e.run(ReconcileConfig{})
	orphans := []string{b.Commands[0].ID, g.Commands[0].ID}
	if got := rcIDs(rep.Orphans, func(o Orphan) string { return o.ID }); !slices.Equal(got, orphans) {
		t.Fatalf("orphans %v, want %v", got, orphans)
	}
	if rep.Orphans[0].DecisionSeq != b.Seq || rep.Orphans[1].Kind != "book_flight" {
		t.Fatalf("orphan details %+v", rep.Orphans)
	}
	if want := []Duplicate{{ID: c.Commands[0].ID, Kind: "book_flight", Count: 2}}; !slices.Equal(rep.Duplicates, want) {
		t.Fatalf("duplicates %+v, want %+v", rep.Duplicates, want)
	}
	if len(rep.Stuck) != 0 {
		t.Fatalf("stuck with the default threshold: %+v", rep.Stuck)
	}
	wantKinds := map[string]Counts{
		"book_flight": {Issued: 5, InOutbox: 2, InFlight: 1, Completed: 1, NotYetRelayed: 1, Orphans: 2, Duplicates: 1},
		"book_hotel":  {Issued: 3, InOutbox: 3, Scheduled: 1, InFlight: 1, Failed: 1, Dead: 1},
	}
	if fmt.Sprint(rep.Kinds) != fmt.Sprint(wantKinds) {
		t.Fatalf("kinds:\n got %+v\nwant %+v", rep.Kinds, wantKinds)
	}
	if rep.Drift() != 3 || rep.RelayAckFloor != g.Seq || rep.EventsLastSeq != h.Seq {
		t.Fatalf("drift %d, ack floor %d (want %d), log at %d (want %d)", rep.Drift(), rep.RelayAckFloor, g.Seq, rep.EventsLastSeq, h.Seq)
	}

	// An old in-flight message: c's and d's commands have no outcome.
	later := e.run(ReconcileConfig{StuckAfter: 30 * time.Minute, Now: func() time.Time { return time.Now().Add(time.Hour) }})
	stuck := []string{c.Commands[0].ID, d.Commands[0].ID}
	got := rcIDs(later.Stuck, func(s Stuck) string { return s.ID })
	slices.Sort(got)
	if !slices.Equal(got, stuck) || later.Totals.Stuck != 2 || later.Drift() != 5 {
		t.Fatalf("stuck %v (total %d, drift %d), want %v", got, later.Totals.Stuck, later.Drift(), stuck)
	}

	// Repair: g's command was never in OUTBOX and is stored now; b's was
	// deleted minutes ago and OUTBOX's duplicate window still drops it.
	rc := NewReconciler(e.js, e.ns, ReconcileConfig{}, nil)
	n, err := rc.Repair(ctx, rep)
	if n != 1 || !errors.Is(err, ErrRepairDeduplicated) {
		t.Fatalf("repair: n=%d err=%v; want 1 and ErrRepairDeduplicated for %s", n, err, b.Commands[0].ID)
	}
	m, err := st.GetLastMsgForSubject(ctx, wire.CommandSubject(e.ns, "book_flight"))
	if err != nil {
		t.Fatal(err)
	}
	stored, err := e.log.ReadFrom(ctx, g.Seq, 1)
	if err != nil || len(stored) != 1 {
		t.Fatalf("read g's decision: %v", err)
	}
	want := wire.EncodeCommand(e.ns, stored[0], g.Commands[0], time.Now()) // as the relay builds it
	if m.Header.Get(jetstream.MsgIDHeader) != g.Commands[0].ID || m.Header.Get(wire.HeaderDecisionSeq) != want.Header.Get(wire.HeaderDecisionSeq) ||
		m.Header.Get(wire.HeaderIssued) != want.Header.Get(wire.HeaderIssued) || m.Header.Get(wire.HeaderDecisionID) != g.ID {
		t.Fatalf("repaired message headers %v, want like %v", m.Header, want.Header)
	}
	after := e.run(ReconcileConfig{})
	if got := rcIDs(after.Orphans, func(o Orphan) string { return o.ID }); !slices.Equal(got, []string{b.Commands[0].ID}) {
		t.Fatalf("orphans after repair %v, want only %s", got, b.Commands[0].ID)
	}
	before := e.outboxMsgs()
	if n, err := rc.Repair(ctx, rep); n != 0 || !errors.Is(err, ErrRepairDeduplicated) {
		t.Fatalf("second repair: n=%d err=%v", n, err)
	}
	if e.outboxMsgs() != before {
		t.Fatalf("second repair stored something: %d → %d messages", before, e.outboxMsgs())
	}
}

// With a short duplicate window, a deleted OUTBOX message is repaired once
// the window has passed; then reconcile finds no orphan, and repairing
// again stores nothing.
func TestRepairRepublishesADeletedCommandWithItsOriginalID(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{OutboxDuplicateWindow: 200 * time.Millisecond})
	ctx := t.Context()
	rec := e.decide("x", streams.Command{Kind: "book_flight", Payload: json.RawMessage(`{"seat":"1A"}`)}, streams.Command{Kind: "remind", DeliverAfter: time.Now().Add(time.Hour)})
	e.publish(rec, 0)
	e.publish(rec, 1)
	e.ackRelay(rec.Seq)
	st, err := e.js.Stream(ctx, e.names.Outbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx); err != nil { // both the command and its schedule
		t.Fatal(err)
	}
	rep := e.run(ReconcileConfig{})
	if got := rcIDs(rep.Orphans, func(o Orphan) string { return o.ID }); !slices.Equal(got, []string{rec.Commands[0].ID, rec.Commands[1].ID}) {
		t.Fatalf("orphans %v", got)
	}
	rc := NewReconciler(e.js, e.ns, ReconcileConfig{}, nil)
	repaired := 0
	natstest.Eventually(t, 10*time.Second, func() bool {
		n, err := rc.Repair(ctx, rep)
		if err != nil && !errors.Is(err, ErrRepairDeduplicated) {
			t.Fatalf("repair: %v", err)
		}
		repaired += n
		return repaired == 2
	})
	// Repairing again from the same report right away stores nothing: the
	// copies just stored are inside OUTBOX's (short) duplicate window.
	msgs := e.outboxMsgs()
	if n, err := rc.Repair(ctx, rep); n != 0 || err != nil {
		t.Fatalf("repair again: n=%d err=%v", n, err)
	}
	if e.outboxMsgs() != msgs {
		t.Fatal("repair again stored a copy")
	}
	after := e.run(ReconcileConfig{})
	if after.Drift() != 0 || after.Totals.InOutbox != 2 || after.Totals.Scheduled != 1 {
		t.Fatalf("after repair: drift %d, %+v", after.Drift(), after.Totals)
	}
	m, err := st.GetLastMsgForSubject(ctx, wire.CommandSubject(e.ns, "book_flight"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(jetstream.MsgIDHeader) != rec.Commands[0].ID || string(m.Data) != `{"seat":"1A"}` {
		t.Fatalf("repaired message: %v %s", m.Header, m.Data)
	}
	if _, err := st.GetLastMsgForSubject(ctx, wire.ScheduleSubject(e.ns, "remind", rec.Commands[1].ID)); err != nil {
		t.Fatalf("schedule not restored: %v", err)
	}
}

// A command whose decision is older than OUTBOX's retention and that is
// gone from OUTBOX aged out: expired, not an orphan (and not repaired).
func TestReconcileCountsAgedOutCommandsAsExpired(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	e.decide("old", streams.Command{Kind: "book_flight"})
	// A schedule due in 7½ days that is gone 8 days on never fired (OUTBOX
	// ages schedules out too): lost, not expired.
	late := e.decide("late", streams.Command{Kind: "remind", DeliverAfter: time.Now().Add(180 * time.Hour)})
	e.ackRelay(late.Seq)
	rep := e.run(ReconcileConfig{Now: func() time.Time { return time.Now().Add(8 * 24 * time.Hour) }})
	if rep.Kinds["book_flight"].Expired != 1 || rep.Kinds["book_flight"].Orphans != 0 || rep.Totals.Expired != 1 {
		t.Fatalf("kinds %+v", rep.Kinds)
	}
	if len(rep.Orphans) != 1 || rep.Orphans[0].ID != late.Commands[0].ID || rep.Drift() != 1 {
		t.Fatalf("lost schedule: orphans %+v", rep.Orphans)
	}
	// Without the relay's consumer nothing counts as relayed.
	e2 := newRCEnv(t, s, streams.ProvisionConfig{})
	e2.decide("new", streams.Command{Kind: "book_flight"})
	rep = e2.run(ReconcileConfig{})
	if rep.RelayConsumer || rep.Totals.NotYetRelayed != 1 || rep.Drift() != 0 {
		t.Fatalf("no relay consumer: %+v", rep)
	}
}

// A delayed command's schedule fires into <ns>.outbox.<kind> without the
// schedule's Msg-Id but with its Esjet-Command-Id: reconcile follows it
// from scheduled to in flight, with no drift on the way.
func TestReconcileFollowsAFiredSchedule(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	rec := e.decide("soon", streams.Command{Kind: "remind", DeliverAfter: time.Now().Add(1500 * time.Millisecond)})
	e.publish(rec, 0)
	e.ackRelay(rec.Seq)
	if rep := e.run(ReconcileConfig{}); rep.Totals != (Counts{Issued: 1, InOutbox: 1, Scheduled: 1}) {
		t.Fatalf("before firing: %+v", rep.Totals)
	}
	st, err := e.js.Stream(t.Context(), e.names.Outbox)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		_, err := st.GetLastMsgForSubject(t.Context(), wire.CommandSubject(e.ns, "remind"))
		return err == nil
	})
	natstest.Eventually(t, 5*time.Second, func() bool { return e.outboxMsgs() == 1 }) // the schedule is gone
	rep := e.run(ReconcileConfig{})
	if rep.Totals != (Counts{Issued: 1, InOutbox: 1, InFlight: 1}) || rep.Drift() != 0 {
		t.Fatalf("after firing: %+v", rep.Totals)
	}
}

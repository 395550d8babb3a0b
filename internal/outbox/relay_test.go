package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// relayEnv is one provisioned namespace with its log.
type relayEnv struct {
	js  jetstream.JetStream
	ns  string
	log *streams.Log
}

func newRelayEnv(t *testing.T, s *server.Server) *relayEnv {
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
	return &relayEnv{js: js, ns: ns, log: l}
}

// appendWithCommands appends one decision issuing n commands of kind to a
// fresh aggregate and returns the record.
func (e *relayEnv) appendWithCommands(t *testing.T, id, kind string, n int, deliverAfter time.Time) streams.Record {
	t.Helper()
	d := streams.Decision{ID: uuid.NewString(), AggregateType: "order", AggregateID: id,
		Events: []streams.Event{{Type: "placed", Data: json.RawMessage(`{"n":1}`)}}}
	for i := range n {
		d.Commands = append(d.Commands, streams.Command{Kind: kind, Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), Report: true, DeliverAfter: deliverAfter})
	}
	rec, err := e.log.Append(t.Context(), d, streams.Position{})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// outboxByCommand counts OUTBOX messages on <ns>.outbox.> per command id.
func (e *relayEnv) outboxByCommand(t *testing.T) map[string]int {
	t.Helper()
	st, err := e.js.Stream(t.Context(), streams.NamesFor(e.ns).Outbox)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	info := st.CachedInfo()
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(t.Context(), seq)
		if err != nil {
			continue // deleted or a purged schedule
		}
		if len(m.Subject) > len(e.ns)+8 && m.Subject[:len(e.ns)+8] == e.ns+".outbox." {
			out[m.Header.Get(wire.HeaderCommandID)]++
		}
	}
	return out
}

func runRelay(t *testing.T, e *relayEnv, cfg RelayConfig) (*Relay, context.CancelFunc) {
	t.Helper()
	r, err := NewRelay(t.Context(), e.js, e.ns, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("relay run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return r, stop
}

func TestRelay(t *testing.T) {
	s := natstest.RunServer(t)
	t.Run("every command reaches OUTBOX once with its id and cause", func(t *testing.T) { t.Parallel(); testRelayOnce(t, newRelayEnv(t, s)) })
	t.Run("a redelivered decision adds no copy", func(t *testing.T) { t.Parallel(); testRelayRedelivery(t, newRelayEnv(t, s)) })
	t.Run("two relays: one active, failover when it stops", func(t *testing.T) { t.Parallel(); testRelayFailover(t, newRelayEnv(t, s)) })
	t.Run("a delayed command fires once, on time", func(t *testing.T) { t.Parallel(); testRelayDelayed(t, newRelayEnv(t, s)) })
}

func testRelayOnce(t *testing.T, e *relayEnv) {
	var recs []streams.Record
	for i := range 20 {
		recs = append(recs, e.appendWithCommands(t, fmt.Sprintf("o%d", i), "ship", i%3, time.Time{}))
	}
	r, _ := runRelay(t, e, RelayConfig{Batch: 7})
	want := 0
	for _, rec := range recs {
		want += len(rec.Commands)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return r.Stats().LastSeq == recs[len(recs)-1].Seq })
	got := e.outboxByCommand(t)
	if len(got) != want {
		t.Fatalf("OUTBOX holds %d distinct commands, want %d", len(got), want)
	}
	for id, n := range got {
		if n != 1 {
			t.Fatalf("command %s stored %d times", id, n)
		}
	}
	st := r.Stats()
	if st.Commands != int64(want) || st.Decisions != int64(len(recs)) || st.Duplicates != 0 {
		t.Fatalf("stats %+v, want %d commands over %d decisions", st, want, len(recs))
	}
	// The message carries its id, cause and payload.
	ob, _ := e.js.Stream(t.Context(), streams.NamesFor(e.ns).Outbox)
	m, err := ob.GetLastMsgForSubject(t.Context(), wire.CommandSubject(e.ns, "ship"))
	if err != nil {
		t.Fatal(err)
	}
	rec := recs[len(recs)-1] // 19 % 3 = 1 command
	for k, v := range map[string]string{
		jetstream.MsgIDHeader: rec.Commands[0].ID, wire.HeaderCommandID: rec.Commands[0].ID, wire.HeaderCommandKind: "ship",
		wire.HeaderAggregateType: "order", wire.HeaderAggregateID: "o19", wire.HeaderVersion: "1", wire.HeaderDecisionID: rec.ID,
		wire.HeaderDecisionSeq: fmt.Sprint(rec.Seq), wire.HeaderReport: "true",
	} {
		if got := m.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if string(m.Data) != `{"i":0}` {
		t.Errorf("payload %s", m.Data)
	}
	// The relay's consumer has acknowledged everything.
	cons, _ := e.js.Consumer(t.Context(), streams.NamesFor(e.ns).Events, ConsumerName)
	info, err := cons.Info(t.Context())
	if err != nil || info.NumPending != 0 || info.NumAckPending != 0 || info.AckFloor.Stream != rec.Seq {
		t.Fatalf("relay consumer: %+v %v", info, err)
	}
}

func testRelayRedelivery(t *testing.T, e *relayEnv) {
	for i := range 10 {
		e.appendWithCommands(t, fmt.Sprintf("r%d", i), "pay", 2, time.Time{})
	}
	r, stop := runRelay(t, e, RelayConfig{})
	natstest.Eventually(t, 10*time.Second, func() bool { return r.Stats().Decisions == 10 })
	stop()
	// Forget the relay's progress: every decision is delivered again, as
	// after a crash between publishing and acking.
	names := streams.NamesFor(e.ns)
	if err := e.js.DeleteConsumer(t.Context(), names.Events, ConsumerName); err != nil {
		t.Fatal(err)
	}
	r2, _ := runRelay(t, e, RelayConfig{})
	natstest.Eventually(t, 10*time.Second, func() bool { return r2.Stats().Decisions == 10 })
	if st := r2.Stats(); st.Duplicates != 20 || st.Commands != 0 {
		t.Fatalf("second relay %+v: want all 20 commands recognised as duplicates", st)
	}
	for id, n := range e.outboxByCommand(t) {
		if n != 1 {
			t.Fatalf("command %s stored %d times", id, n)
		}
	}
}

func testRelayFailover(t *testing.T, e *relayEnv) {
	cfg := RelayConfig{PinnedTTL: 2 * time.Second, Batch: 4}
	a, stopA := runRelay(t, e, cfg)
	b, stopB := runRelay(t, e, cfg)
	for i := range 10 {
		e.appendWithCommands(t, fmt.Sprintf("f%d", i), "mail", 1, time.Time{})
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return a.Stats().Decisions+b.Stats().Decisions == 10 })
	standby, stopActive := b, stopA
	if b.Stats().Decisions > 0 {
		standby, stopActive = a, stopB
	}
	if standby.Stats().Decisions != 0 {
		t.Fatalf("both relays relayed: %+v and %+v", a.Stats(), b.Stats())
	}
	stopActive()
	start := time.Now()
	for i := 10; i < 20; i++ {
		e.appendWithCommands(t, fmt.Sprintf("f%d", i), "mail", 1, time.Time{})
	}
	natstest.Eventually(t, 15*time.Second, func() bool { return standby.Stats().Decisions == 10 })
	t.Logf("standby took over after %v", time.Since(start).Round(10*time.Millisecond))
	got := e.outboxByCommand(t)
	if len(got) != 20 {
		t.Fatalf("OUTBOX holds %d commands, want 20", len(got))
	}
	for id, n := range got {
		if n != 1 {
			t.Fatalf("command %s relayed %d times", id, n)
		}
	}
}

func testRelayDelayed(t *testing.T, e *relayEnv) {
	r, _ := runRelay(t, e, RelayConfig{})
	due := time.Now().Add(2 * time.Second)
	rec := e.appendWithCommands(t, "later", "remind", 1, due)
	natstest.Eventually(t, 10*time.Second, func() bool { return r.Stats().Scheduled == 1 })
	if got := e.outboxByCommand(t); len(got) != 0 {
		t.Fatalf("the delayed command is already in OUTBOX: %v", got)
	}
	var fired time.Time
	natstest.Eventually(t, 10*time.Second, func() bool {
		got := e.outboxByCommand(t)
		if got[rec.Commands[0].ID] == 1 {
			fired = time.Now()
			return true
		}
		return false
	})
	if fired.Before(due) {
		t.Fatalf("fired at %v, before it was due at %v", fired, due)
	}
	if late := fired.Sub(due); late > 2*time.Second {
		t.Fatalf("fired %v late", late)
	}
	ob, _ := e.js.Stream(t.Context(), streams.NamesFor(e.ns).Outbox)
	m, err := ob.GetLastMsgForSubject(t.Context(), wire.CommandSubject(e.ns, "remind"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get(wire.HeaderCommandID) != rec.Commands[0].ID || m.Header.Get(wire.HeaderDeliverAfter) == "" || string(m.Data) != `{"i":0}` {
		t.Fatalf("fired message headers %v data %s", m.Header, m.Data)
	}
	// The schedule is gone once fired: nothing will fire twice.
	if _, err := ob.GetLastMsgForSubject(t.Context(), wire.ScheduleSubject(e.ns, "remind", rec.Commands[0].ID)); err == nil {
		t.Fatal("the schedule message is still there after firing")
	}
}

// deadRelay does what a relay that dies at the worst moment did: it takes
// decisions from the relay's consumer, publishes their commands to OUTBOX
// exactly as the relay does, and never acks them. The decisions come back
// (NumDelivered 2) after cfg.AckWait.
func deadRelay(t *testing.T, e *relayEnv, cfg RelayConfig, n int) {
	t.Helper()
	ctx := t.Context()
	names := streams.NamesFor(e.ns)
	cons, err := e.js.CreateOrUpdateConsumer(ctx, names.Events, RelayConsumerConfig(names, cfg))
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(n, jetstream.FetchPriorityGroup(PriorityGroup), jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for m := range batch.Messages() {
		meta, _ := m.Metadata()
		d, err := streams.Decode(m.Data())
		if err != nil {
			t.Fatal(err)
		}
		rec := streams.Record{Decision: d, Seq: meta.Sequence.Stream, Subject: m.Subject(), Stored: meta.Timestamp}
		for _, c := range rec.Commands {
			if _, err := e.js.PublishMsg(ctx, wire.EncodeCommand(e.ns, rec, c, time.Now())); err != nil {
				t.Fatal(err)
			}
		}
		got++
	}
	if got != n {
		t.Fatalf("dead relay took %d decisions, want %d", got, n)
	}
	// Its pin goes with it (as after PinnedTTL).
	st, err := e.js.Stream(ctx, names.Events)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.UnpinConsumer(ctx, ConsumerName, PriorityGroup); err != nil {
		t.Fatal(err)
	}
}

// TestRelayResumedAfterTheDedupWindowStoresNoSecondCopy: a relay died after
// OUTBOX took its decisions' commands and before it acked the decisions;
// the next relay gets them back after OUTBOX's duplicate window has passed.
// It finds the commands already in OUTBOX (a due command, a pending
// schedule, a schedule that fired since) and stores no second copy:
// TestRelayStartedAfterTheDedupWindowOnAForgetfulConsumerStoresNoSecondCopy:
// a server killed hard forgets a consumer's last deliveries, and the relay
// that starts after it gets decisions it had relayed as first deliveries
// (here: the relay's consumer is deleted and made again, which forgets them
// all). Decisions stored before the relay started are checked too: no
// second copy after OUTBOX's window, and reconcile sees no drift.
func TestRelayStartedAfterTheDedupWindowOnAForgetfulConsumerStoresNoSecondCopy(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	if _, err := streams.Provision(t.Context(), js, ns, streams.ProvisionConfig{OutboxDuplicateWindow: time.Second}, nil); err != nil {
		t.Fatal(err)
	}
	l, err := streams.Open(t.Context(), js, ns, streams.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &relayEnv{js: js, ns: ns, log: l}
	for i := range 5 {
		e.appendWithCommands(t, fmt.Sprintf("w%d", i), "pay", 1, time.Time{})
	}
	r, stop := runRelay(t, e, RelayConfig{})
	natstest.Eventually(t, 10*time.Second, func() bool { return r.Stats().Decisions == 5 })
	stop()
	time.Sleep(1500 * time.Millisecond) // let the 1s dedup window pass: nothing to poll
	if err := js.DeleteConsumer(t.Context(), streams.NamesFor(ns).Events, ConsumerName); err != nil {
		t.Fatal(err)
	}
	r2, _ := runRelay(t, e, RelayConfig{})
	natstest.Eventually(t, 10*time.Second, func() bool { return r2.Stats().Decisions == 5 })
	if st := r2.Stats(); st.Commands != 0 || st.Duplicates != 5 {
		t.Fatalf("relay after the window: %+v; want the 5 commands found in OUTBOX and none published", st)
	}
	for id, n := range e.outboxByCommand(t) {
		if n != 1 {
			t.Errorf("command %s stored %d times, want once", id, n)
		}
	}
	rep, err := ops.NewReconciler(js, ns, ops.ReconcileConfig{}, nil).Run(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Drift() != 0 || len(rep.Duplicates) != 0 || rep.Totals.Issued != 5 {
		t.Fatalf("reconcile: totals %+v, drift %d; want no duplicates", rep.Totals, rep.Drift())
	}
}

// exactly once into OUTBOX has no time limit. Reconcile sees no drift.
func TestRelayResumedAfterTheDedupWindowStoresNoSecondCopy(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	if _, err := streams.Provision(t.Context(), js, ns, streams.ProvisionConfig{OutboxDuplicateWindow: time.Second}, nil); err != nil {
		t.Fatal(err)
	}
	l, err := streams.Open(t.Context(), js, ns, streams.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &relayEnv{js: js, ns: ns, log: l}
	for i := range 5 {
		e.appendWithCommands(t, fmt.Sprintf("w%d", i), "pay", 1, time.Time{})
	}
	e.appendWithCommands(t, "later", "remind", 1, time.Now().Add(time.Hour))    // pending schedule
	e.appendWithCommands(t, "soon", "remind", 1, time.Now().Add(2*time.Second)) // fires meanwhile
	cfg := RelayConfig{AckWait: time.Second}
	deadRelay(t, e, cfg, 7)
	// Let the 1s dedup window (and the dead relay's lease) pass, and the
	// near schedule fire: nothing to poll for the window.
	time.Sleep(1500 * time.Millisecond)
	natstest.Eventually(t, 10*time.Second, func() bool { return e.outboxByCommand(t)["order:soon:1:0"] == 1 })

	r, _ := runRelay(t, e, cfg)
	natstest.Eventually(t, 10*time.Second, func() bool { return r.Stats().Decisions == 7 })
	st := r.Stats()
	if st.Commands != 0 || st.Scheduled != 0 || st.Duplicates != 7 || st.Scanned == 0 {
		t.Fatalf("relay after the window: %+v; want the 7 commands found in OUTBOX and none published", st)
	}
	for id, n := range e.outboxByCommand(t) {
		if n != 1 {
			t.Errorf("command %s stored %d times, want once", id, n)
		}
	}
	rep, err := ops.NewReconciler(js, ns, ops.ReconcileConfig{}, nil).Run(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Drift() != 0 || rep.Totals.Issued != 7 || rep.Totals.Scheduled != 1 || rep.Totals.InOutbox != 7 {
		t.Fatalf("reconcile: totals %+v, drift %d; want 7 issued, all in OUTBOX once, no drift", rep.Totals, rep.Drift())
	}

	// The check costs nothing once decisions stop coming back: a new
	// decision is published without reading OUTBOX.
	scanned := st.Scanned
	e.appendWithCommands(t, "fresh", "pay", 1, time.Time{})
	natstest.Eventually(t, 10*time.Second, func() bool { return r.Stats().Commands == 1 })
	if got := r.Stats().Scanned; got != scanned {
		t.Fatalf("a first delivery read %d OUTBOX messages", got-scanned)
	}
}

func TestRelayNeverAcksPastADecisionWhoseCommandsFailed(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRelayEnv(t, s)
	names := streams.NamesFor(e.ns)
	ob, err := e.js.Stream(t.Context(), names.Outbox)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ob.CachedInfo().Config
	var recs []streams.Record
	for i := range 3 {
		recs = append(recs, e.appendWithCommands(t, fmt.Sprintf("x%d", i), "ship", 1, time.Time{}))
	}
	r, _ := runRelay(t, e, RelayConfig{Batch: 2})
	natstest.Eventually(t, 10*time.Second, func() bool { return r.Stats().LastSeq == recs[2].Seq })
	refusing := cfg
	refusing.MaxMsgSize = 64 // no command message fits
	if _, err := e.js.UpdateStream(t.Context(), refusing); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 10; i++ {
		recs = append(recs, e.appendWithCommands(t, fmt.Sprintf("x%d", i), "ship", 1, time.Time{}))
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return r.Stats().Failures > 2 })
	cons, _ := e.js.Consumer(t.Context(), names.Events, ConsumerName)
	info, err := cons.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.AckFloor.Stream > recs[2].Seq {
		t.Fatalf("the relay acked through seq %d while only the first 3 commands (up to seq %d) are in OUTBOX", info.AckFloor.Stream, recs[2].Seq)
	}
	if _, err := e.js.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	// New decisions right away: they must not overtake (and, with
	// cumulative acks, swallow) the ones whose commands failed.
	for i := 10; i < 13; i++ {
		recs = append(recs, e.appendWithCommands(t, fmt.Sprintf("x%d", i), "ship", 1, time.Time{}))
	}
	natstest.Eventually(t, 20*time.Second, func() bool { return r.Stats().LastSeq == recs[12].Seq })
	natstest.Eventually(t, 5*time.Second, func() bool { return len(e.outboxByCommand(t)) == len(recs) })
	got := e.outboxByCommand(t)
	for _, rec := range recs {
		if got[rec.Commands[0].ID] != 1 {
			t.Fatalf("command %s is in OUTBOX %d times", rec.Commands[0].ID, got[rec.Commands[0].ID])
		}
	}
}

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
		wire.HeaderDecisionSeq: fmt.Sprint(rec.Seq), wire.HeaderReport: "true", wire.HeaderCausationID: rec.ID,
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

// TestRelayRestartedAfterTheDedupWindowStoresCopiesReconcileReports: the one
// case the outbox cannot fold by itself. A relay whose decisions come back
// after OUTBOX's dedup window has passed publishes their commands again;
// reconcile names each such command as a duplicate (the workers' receipts
// are what fold them into one effect).
func TestRelayRestartedAfterTheDedupWindowStoresCopiesReconcileReports(t *testing.T) {
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
	for id, n := range e.outboxByCommand(t) {
		if n != 2 {
			t.Fatalf("command %s stored %d times, want 2 (the window had passed)", id, n)
		}
	}
	rep, err := ops.NewReconciler(js, ns, ops.ReconcileConfig{}, nil).Run(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Duplicates) != 5 || rep.Totals.Duplicates != 5 || rep.Totals.Orphans != 0 || rep.Drift() != 5 {
		t.Fatalf("reconcile: %d duplicates listed, totals %+v, drift %d; want the 5 copies and nothing else", len(rep.Duplicates), rep.Totals, rep.Drift())
	}
	for _, d := range rep.Duplicates {
		if d.Count != 2 {
			t.Fatalf("duplicate %+v, want count 2", d)
		}
	}
}

// TestRelayNeverAcksPastADecisionWhoseCommandsFailed: OUTBOX refuses
// publishes for a while (here: a message size limit too small for them). The relay must not
// move on — its acks are cumulative, so acking a later decision would also
// ack the one whose command never landed. When OUTBOX takes messages again,
// every command arrives.
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

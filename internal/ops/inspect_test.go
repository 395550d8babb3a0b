package ops

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/outbox"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

func TestInspectLagWhileTheRelayIsStoppedThenCaughtUp(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	in := Inspect(e.js, e.ns)

	lag, err := in.Lag(t.Context())
	if err != nil || lag.RelayConsumer || lag.Unrelayed != 0 {
		t.Fatalf("empty log, no relay: %+v %v", lag, err)
	}
	// The relay's consumer exists (a relay ran once), but none runs now.
	if _, err := outbox.NewRelay(t.Context(), e.js, e.ns, outbox.RelayConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	first := e.decide("a", streams.Command{Kind: "book_flight"})
	e.decide("b", streams.Command{Kind: "book_flight"})
	last := e.decide("c")
	lag, err = in.Lag(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !lag.RelayConsumer || lag.Unrelayed != 3 || lag.AckFloor != 0 || lag.EventsLastSeq != last.Seq ||
		lag.OldestSeq != first.Seq || lag.OldestAt.IsZero() || lag.OldestAge <= 0 {
		t.Fatalf("stopped relay: %+v", lag)
	}

	rcStartRelay(t, e.js, e.ns)
	rcWaitRelayed(t, e.js, e.names, last.Seq)
	lag, err = in.Lag(t.Context())
	if err != nil || lag.Unrelayed != 0 || lag.AckFloor != last.Seq || lag.OldestSeq != 0 || lag.OldestAge != 0 {
		t.Fatalf("caught up: %+v %v", lag, err)
	}
}

func TestInspectKindsCountsPendingInFlightDoneDead(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	ctx := t.Context()
	flight, hotel := streams.Command{Kind: "book_flight"}, streams.Command{Kind: "book_hotel"}
	a := e.decide("a", flight, hotel)
	b := e.decide("b", flight, hotel)
	c := e.decide("c", hotel, streams.Command{Kind: "remind", DeliverAfter: time.Now().Add(time.Hour)})
	for _, rec := range []streams.Record{a, b, c} {
		for i := range rec.Commands {
			e.publish(rec, i)
		}
	}
	e.putReceipt(a.Commands[0].ID, "book_flight", wire.OutcomeDone)
	e.putReceipt(b.Commands[0].ID, "book_flight", wire.OutcomeFailed)
	e.deadLetter(b, 0, "no seats")
	// book_hotel has workers: one message taken, not acked.
	cons, err := e.js.CreateOrUpdateConsumer(ctx, e.names.Outbox, jetstream.ConsumerConfig{
		Durable: wire.WorkerConsumerName("book_hotel"), FilterSubject: wire.CommandSubject(e.ns, "book_hotel"), AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1)
	if err != nil {
		t.Fatal(err)
	}
	for range batch.Messages() {
	}

	kinds, err := Inspect(e.js, e.ns).Kinds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []KindStats{
		// No consumer: nobody has ever served book_flight, and it has pending commands.
		{Kind: "book_flight", Messages: 2, Pending: 2, Done: 1, Failed: 1, Dead: 1, Stalled: true},
		// A delivery just now: served.
		{Kind: "book_hotel", Messages: 3, Consumer: "esjet-worker-book_hotel", Pending: 2, InFlight: 1, Pulling: true},
		{Kind: "remind", Scheduled: 1},
	}
	if len(kinds) != len(want) {
		t.Fatalf("kinds %+v", kinds)
	}
	for i := range want {
		got := kinds[i]
		if (got.Consumer != "") != !got.LastActive.IsZero() {
			t.Errorf("kind %s: last active %v with consumer %q", got.Kind, got.LastActive, got.Consumer)
		}
		got.LastActive = time.Time{}
		if got != want[i] {
			t.Errorf("kind %d:\n got %+v\nwant %+v", i, got, want[i])
		}
	}
}

// TestInspectKindsFlagsPendingCommandsNobodyPulls: a kind whose workers
// are gone (no pull request waiting, nothing taken for longer than
// ActiveWindow) and that has pending commands is stalled; a kind with a
// pull request waiting is served.
func TestInspectKindsFlagsPendingCommandsNobodyPulls(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	ctx := t.Context()
	a := e.decide("a", streams.Command{Kind: "pay"}, streams.Command{Kind: "pay"}, streams.Command{Kind: "notify"})
	for i := range a.Commands {
		e.publish(a, i)
	}
	consumer := func(kind string) jetstream.Consumer {
		cons, err := e.js.CreateOrUpdateConsumer(ctx, e.names.Outbox, jetstream.ConsumerConfig{
			Durable: wire.WorkerConsumerName(kind), FilterSubject: wire.CommandSubject(e.ns, kind), AckPolicy: jetstream.AckExplicitPolicy,
		})
		if err != nil {
			t.Fatal(err)
		}
		return cons
	}
	// pay: a worker took one command and left; notify: a worker waits.
	batch, err := consumer("pay").Fetch(1)
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		_ = m.Ack()
	}
	cc, err := consumer("notify").Consume(func(m jetstream.Msg) {}, jetstream.PullMaxMessages(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()

	in := Inspect(e.js, e.ns)
	in.now = func() time.Time { return time.Now().Add(ActiveWindow + time.Second) }
	var kinds []KindStats
	natstest.Eventually(t, 5*time.Second, func() bool {
		kinds, err = in.Kinds(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(kinds) == 2 && kinds[0].Kind == "notify" && kinds[0].Waiting > 0 && kinds[0].Pending == 0
	})
	if n, p := kinds[0], kinds[1]; !n.Pulling || n.Stalled || p.Kind != "pay" || p.Pending != 1 || p.Waiting != 0 || p.Pulling || !p.Stalled {
		t.Fatalf("kinds: %+v", kinds)
	}
}

func TestInspectCommandFindsCauseOutboxCopyReceiptAndDeadLetter(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	ctx := t.Context()
	e.decide("a") // version 1, no commands
	rec := e.decide("a", streams.Command{Kind: "book_flight"}, streams.Command{Kind: "book_hotel", Report: true})
	e.ackRelay(rec.Seq)
	ack := e.publish(rec, 1)
	e.putReceipt(rec.Commands[1].ID, "book_hotel", wire.OutcomeFailed)
	e.deadLetter(rec, 1, "hotel closed")
	in := Inspect(e.js, e.ns)

	info, err := in.Command(ctx, rec.Commands[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	cause := info.Cause
	if cause == nil || cause.AggregateType != "trip" || cause.AggregateID != "a" || cause.Version != 2 || cause.DecisionID != rec.ID ||
		cause.Seq != rec.Seq || cause.Time.IsZero() || !cause.Report || info.Kind != "book_hotel" || !info.Relayed {
		t.Fatalf("cause %+v (kind %q, relayed %v)", cause, info.Kind, info.Relayed)
	}
	if len(info.Outbox) != 1 || info.Outbox[0].Seq != ack.Sequence || info.Outbox[0].MsgID != rec.Commands[1].ID || info.Schedule != nil {
		t.Fatalf("outbox %+v schedule %+v", info.Outbox, info.Schedule)
	}
	if info.Receipt == nil || info.Receipt.Outcome != wire.OutcomeFailed {
		t.Fatalf("receipt %+v", info.Receipt)
	}
	if len(info.Dead) != 1 || info.Dead[0].Error != "hotel closed" || info.Dead[0].Attempts != 5 || info.Dead[0].Worker != "node-1" {
		t.Fatalf("dead %+v", info.Dead)
	}

	// The other command was recorded and relayed but never reached OUTBOX.
	info, err = in.Command(ctx, rec.Commands[0].ID)
	if err != nil || info.Cause == nil || len(info.Outbox) != 0 || info.Receipt != nil || len(info.Dead) != 0 {
		t.Fatalf("orphan: %+v %v", info, err)
	}

	if _, err := in.Command(ctx, "trip:a:9:0"); !errors.Is(err, ErrUnknownCommand) || !strings.Contains(err.Error(), "not in the log") {
		t.Fatalf("unknown id: %v", err)
	}
	// The decision is in the log, the index past its commands.
	badIndex := fmt.Sprintf("trip:a:%d:5", rec.LastVersion())
	if _, err := in.Command(ctx, badIndex); !errors.Is(err, ErrUnknownCommand) ||
		!strings.Contains(err.Error(), fmt.Sprintf("decision at version %d issued %d command(s)", rec.LastVersion(), len(rec.Commands))) {
		t.Fatalf("id %s past its decision's commands: %v", badIndex, err)
	}
	for _, bad := range []string{"", "trip:a:1", "trip:a:x:0", "trip:a.b:1:0", "trip:a:0:0", "trip:a:1:-1"} {
		if _, err := in.Command(ctx, bad); err == nil || errors.Is(err, ErrUnknownCommand) {
			t.Errorf("id %q: err = %v, want a format error", bad, err)
		}
	}
}

func TestInspectCommandFindsAPendingSchedule(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	rec := e.decide("s", streams.Command{Kind: "remind", DeliverAfter: time.Now().Add(time.Hour)})
	ack := e.publish(rec, 0)
	info, err := Inspect(e.js, e.ns).Command(t.Context(), rec.Commands[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if info.Schedule == nil || info.Schedule.Seq != ack.Sequence || len(info.Outbox) != 0 || info.Cause.DeliverAfter.IsZero() || info.Relayed {
		t.Fatalf("%+v", info)
	}
}

// Looking a command up bisects OUTBOX to just before its copy (a few
// direct gets) and reads on to the copy, or to the first relay copy past
// the relay's horizon (its consumer's MaxAckPending): the oldest command
// costs what the newest does, whatever OUTBOX holds after it.
func TestInspectCommandReadsOutboxOnlyAroundItsDecision(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	ctx := t.Context()
	cfg := outbox.RelayConsumerConfig(e.names, outbox.RelayConfig{Batch: 2})
	if _, err := e.js.CreateOrUpdateConsumer(ctx, e.names.Events, cfg); err != nil {
		t.Fatal(err)
	}
	horizon := cfg.MaxAckPending
	const n = 200
	recs := make([]streams.Record, n)
	for i := range n {
		recs[i] = e.decide(fmt.Sprintf("t%d", i), streams.Command{Kind: "book_flight"})
		if i != 0 { // the first command never reached OUTBOX
			e.publish(recs[i], 0)
		}
	}
	in := Inspect(e.js, e.ns)
	read := func(id string) (CommandInfo, int64) {
		t.Helper()
		before := in.outboxRead.Load()
		info, err := in.Command(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return info, in.outboxRead.Load() - before
	}
	info, got := read(recs[1].Commands[0].ID)
	if len(info.Outbox) != 1 || info.Outbox[0].MsgID != recs[1].Commands[0].ID || got > 10 {
		t.Fatalf("oldest copy: %+v after reading %d OUTBOX messages, want a few probes and it", info.Outbox, got)
	}
	info, got = read(recs[0].Commands[0].ID)
	if len(info.Outbox) != 0 || got > int64(horizon)+1+10 || got >= n-1 {
		t.Fatalf("orphan: %+v after reading %d of %d OUTBOX messages, want at most a few probes and the horizon %d+1", info.Outbox, got, n-1, horizon)
	}
	info, got = read(recs[n-1].Commands[0].ID)
	if len(info.Outbox) != 1 || info.Outbox[0].MsgID != recs[n-1].Commands[0].ID {
		t.Fatalf("newest copy: %+v after reading %d", info.Outbox, got)
	}
}

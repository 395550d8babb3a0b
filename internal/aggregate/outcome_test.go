package aggregate_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/shred"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// tripStore is one namespace's log and snapshots with the trip registered;
// repo gives a fresh repository over it (a new node, or a restart).
type tripStore struct {
	js     jetstream.JetStream
	ns     string
	log    *streams.Log
	snaps  jetstream.KeyValue
	sealer *shred.Sealer // the trip's traveler is personal data
}

func newTripStore(t *testing.T, s *server.Server) *tripStore {
	t.Helper()
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	if _, err := streams.Provision(t.Context(), js, ns, streams.ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	sealer := &shred.Sealer{Keys: &shred.Lazy{JS: js, Namespace: ns, Replicas: 1}}
	l, err := streams.Open(t.Context(), js, ns, streams.Config{Open: func(rec *streams.Record) error {
		return sealer.OpenRecord(context.Background(), rec)
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), streams.NamesFor(ns).Snapshots)
	if err != nil {
		t.Fatal(err)
	}
	return &tripStore{js: js, ns: ns, log: l, snaps: kv, sealer: sealer}
}

func (s *tripStore) repo(t *testing.T, cfg aggregate.Config) *aggregate.Repository {
	t.Helper()
	reg, err := aggregate.NewRegistry(trip.Definition())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Namespace = s.ns
	if cfg.Sealer == nil {
		cfg.Sealer = s.sealer
	}
	return aggregate.NewRepository(s.log, s.snaps, reg, cfg, nil)
}

func (s *tripStore) decisions(t *testing.T, id string) int {
	t.Helper()
	recs, err := s.log.Load(t.Context(), trip.Type, id, streams.Position{})
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

// report is what the worker's feedback hands the repository.
func report(id, kind string, o esjet.Outcome) aggregate.Request {
	p, _ := json.Marshal(o)
	return aggregate.Request{Type: trip.Type, ID: id, Kind: kind, Payload: p, IdempotencyKey: o.CommandID + "/x"}
}

// bookedTrip requests trip id and reports its budget locked: book_flight
// trip:<id>:2:0 and book_hotel trip:<id>:2:1 are outstanding.
func bookedTrip(t *testing.T, r *aggregate.Repository, id string) {
	t.Helper()
	req, _ := json.Marshal(trip.RequestTrip{Traveler: "ada", Destination: "Lisbon", Budget: 100_000, FlightPrice: 40_000, HotelPrice: 30_000})
	if _, err := r.Handle(t.Context(), aggregate.Request{Type: trip.Type, ID: id, Kind: trip.KindRequestTrip, Payload: req}); err != nil {
		t.Fatal(err)
	}
	res, err := r.HandleOutcome(t.Context(), report(id, esjet.DoneKind(trip.KindLockBudget), esjet.Outcome{CommandID: "trip:" + id + ":1:0"}))
	if err != nil {
		t.Fatalf("the real lock_budget_done: %v", err)
	}
	if len(res.Commands) != 2 || res.Commands[0].ID != "trip:"+id+":2:0" || res.Commands[0].Kind != trip.KindBookFlight {
		t.Fatalf("lock_budget_done issued %+v, want book_flight trip:%s:2:0 and book_hotel", res.Commands, id)
	}
}

func tripState(t *testing.T, r *aggregate.Repository, id string) trip.State {
	t.Helper()
	st, err := r.Get(t.Context(), trip.Type, id)
	if err != nil {
		t.Fatal(err)
	}
	return st.Value.(trip.State)
}

// TestForgedOutcomesAreRefusedCountedAndWriteNothing is issue 11 item 2: a
// book_flight_done with a made-up command id confirmed a trip with booking
// FAKE-123 and the real outcome was then dropped. The framework now accepts
// an outcome only for a command the trip issued and still awaits.
func TestForgedOutcomesAreRefusedCountedAndWriteNothing(t *testing.T) {
	st := newTripStore(t, natstest.RunServer(t))
	r := st.repo(t, aggregate.Config{})
	bookedTrip(t, r, "t1")
	before := st.decisions(t, "t1")
	fake := esjet.Outcome{CommandID: "trip:t1:2:7", Result: json.RawMessage(`{"booking_ref":"FAKE-123"}`)}
	forged := []struct {
		name string
		cmd  aggregate.Request
	}{
		{"made-up command id", report("t1", esjet.DoneKind(trip.KindBookFlight), fake)},
		{"another aggregate's command", report("t1", esjet.DoneKind(trip.KindBookFlight), esjet.Outcome{CommandID: "trip:t2:2:0"})},
		{"garbage command id", report("t1", esjet.DoneKind(trip.KindBookFlight), esjet.Outcome{CommandID: "FAKE"})},
		{"the hotel's command reported as the flight's", report("t1", esjet.DoneKind(trip.KindBookFlight), esjet.Outcome{CommandID: "trip:t1:2:1"})},
		{"a command answered already", report("t1", esjet.DoneKind(trip.KindLockBudget), esjet.Outcome{CommandID: "trip:t1:1:0", Result: json.RawMessage(`{}`)})},
	}
	for i, f := range forged {
		_, err := r.HandleOutcome(t.Context(), f.cmd)
		var refused *aggregate.OutcomeRefusedError
		if !errors.As(err, &refused) || !errors.Is(err, aggregate.ErrOutcomeRefused) || !aggregate.IsPermanent(err) || refused.Reason == "" {
			t.Errorf("%s: %v, want a permanent *OutcomeRefusedError with a reason", f.name, err)
		}
		if got := r.Stats().OutcomesRefused; got != int64(i+1) {
			t.Errorf("%s: OutcomesRefused = %d, want %d", f.name, got, i+1)
		}
	}
	if got := st.decisions(t, "t1"); got != before {
		t.Fatalf("%d decisions after the forgeries, want %d: a forged outcome was written", got, before)
	}
	if s := tripState(t, r, "t1"); s.Flight.Status != trip.LegStatusPending || s.Flight.BookingRef != "" {
		t.Fatalf("flight %+v after the forgeries, want still pending", s.Flight)
	}

	// The real outcome is accepted; the worker's repeat of it is answered
	// from the log; a contradicting second outcome is refused.
	real := report("t1", esjet.DoneKind(trip.KindBookFlight), esjet.Outcome{CommandID: "trip:t1:2:0", Result: json.RawMessage(`{"booking_ref":"FL-1"}`)})
	res, err := r.HandleOutcome(t.Context(), real)
	if err != nil || res.Replayed {
		t.Fatalf("the real book_flight_done: %+v %v", res, err)
	}
	again, err := r.HandleOutcome(t.Context(), real)
	if err != nil || !again.Replayed || again.Seq != res.Seq {
		t.Fatalf("the worker's repeat of the real outcome: %+v %v, want the first result replayed", again, err)
	}
	// The operator tools (dlq retry, reconcile, esjet outbox) recognise
	// the recorded outcome by the same id.
	recs, err := st.log.ReadFrom(t.Context(), res.Seq, 1)
	if err != nil || len(recs) != 1 {
		t.Fatalf("read the outcome decision: %v", err)
	}
	if id, outcome, ok := wire.OutcomeOf(wire.OutcomeSpace(st.ns), recs[0]); !ok || id != "trip:t1:2:0" || outcome != wire.OutcomeDone {
		t.Fatalf("wire.OutcomeOf(the recorded outcome) = %q %q %v, want trip:t1:2:0 done", id, outcome, ok)
	}
	late := report("t1", esjet.FailedKind(trip.KindBookFlight), esjet.Outcome{CommandID: "trip:t1:2:0", Error: "no seats"})
	if _, err := r.HandleOutcome(t.Context(), late); !errors.Is(err, aggregate.ErrOutcomeRefused) {
		t.Fatalf("book_flight_failed after book_flight_done: %v, want ErrOutcomeRefused", err)
	}
	if s := tripState(t, r, "t1"); s.Flight.Status != trip.LegStatusBooked || s.Flight.BookingRef != "FL-1" {
		t.Fatalf("flight %+v, want booked as FL-1", s.Flight)
	}
	if got := st.decisions(t, "t1"); got != before+1 {
		t.Fatalf("%d decisions, want %d: only the real outcome is written", got, before+1)
	}
}

// TestOutcomesCannotBeSent: the public path (what HTTP, micro, esjet send
// and Node.Send reach) refuses an outcome kind, and the type lists it as an
// outcome, not a command.
func TestOutcomesCannotBeSent(t *testing.T) {
	st := newTripStore(t, natstest.RunServer(t))
	r := st.repo(t, aggregate.Config{})
	bookedTrip(t, r, "t1")
	before := st.decisions(t, "t1")
	p, _ := json.Marshal(esjet.Outcome{CommandID: "trip:t1:2:0", Result: json.RawMessage(`{"booking_ref":"FAKE-123"}`)})
	_, err := r.Handle(t.Context(), aggregate.Request{Type: trip.Type, ID: "t1", Kind: esjet.DoneKind(trip.KindBookFlight), Payload: p})
	if !errors.Is(err, aggregate.ErrOutcomeNotSendable) || !aggregate.IsPermanent(err) {
		t.Fatalf("Handle(book_flight_done): %v, want ErrOutcomeNotSendable", err)
	}
	if got := st.decisions(t, "t1"); got != before {
		t.Fatalf("%d decisions, want %d", got, before)
	}
	def := trip.Definition()
	for _, k := range def.Commands() {
		if k != trip.KindRequestTrip && k != trip.KindAddNote {
			t.Errorf("Commands() lists %s; want the client commands only", k)
		}
	}
	if len(def.Outcomes()) != 12 {
		t.Errorf("Outcomes() = %v, want the 12 outcome kinds", def.Outcomes())
	}
	// And the outcome path refuses a client command.
	if _, err := r.HandleOutcome(t.Context(), aggregate.Request{Type: trip.Type, ID: "t1", Kind: trip.KindAddNote, Payload: p}); !errors.Is(err, aggregate.ErrUnknownCommand) {
		t.Fatalf("HandleOutcome(add_note): %v, want ErrUnknownCommand", err)
	}
}

// TestOutstandingCommandsSurviveRestartsFromSnapshotAndFromReplay: the
// outstanding set is framework state, rebuilt by a cold load from a
// snapshot or from the events; a snapshot of the older format (without it)
// is ignored and the aggregate replayed.
func TestOutstandingCommandsSurviveRestartsFromSnapshotAndFromReplay(t *testing.T) {
	s := natstest.RunServer(t)
	for _, c := range []struct {
		name          string
		cfg           aggregate.Config
		oldSnapshot   bool
		snapshotsRead bool
	}{
		{"replay", aggregate.Config{SnapshotEvery: -1}, false, false},
		{"snapshot", aggregate.Config{SnapshotEvery: 1}, false, true},
		{"old snapshot", aggregate.Config{SnapshotEvery: 1}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newTripStore(t, s)
			bookedTrip(t, st.repo(t, c.cfg), "t1")
			if c.oldSnapshot {
				// What a node before outstanding tracking wrote: v1, no
				// outstanding commands.
				old := `{"v":1,"state_schema":1,"seq":2,"version":2,"state":{"status":"budget_locked"}}`
				if _, err := st.snaps.Put(t.Context(), trip.Type+".t1", []byte(old)); err != nil {
					t.Fatal(err)
				}
			}
			r := st.repo(t, c.cfg) // a restarted node: empty cache
			flight := report("t1", esjet.DoneKind(trip.KindBookFlight), esjet.Outcome{CommandID: "trip:t1:2:0", Result: json.RawMessage(`{"booking_ref":"FL-1"}`)})
			if _, err := r.HandleOutcome(t.Context(), flight); err != nil {
				t.Fatalf("the real book_flight_done after a restart: %v", err)
			}
			if got := r.Stats().SnapshotHits > 0; got != c.snapshotsRead {
				t.Errorf("snapshot hits %d, want a snapshot read: %v", r.Stats().SnapshotHits, c.snapshotsRead)
			}
			r = st.repo(t, c.cfg) // and again: the answered command is gone
			if _, err := r.HandleOutcome(t.Context(), report("t1", esjet.FailedKind(trip.KindBookFlight), esjet.Outcome{CommandID: "trip:t1:2:0", Error: "x"})); !errors.Is(err, aggregate.ErrOutcomeRefused) {
				t.Fatalf("a second outcome of book_flight after a restart: %v, want ErrOutcomeRefused", err)
			}
			hotel := report("t1", esjet.DoneKind(trip.KindBookHotel), esjet.Outcome{CommandID: "trip:t1:2:1", Result: json.RawMessage(`{"booking_ref":"HT-1"}`)})
			if _, err := r.HandleOutcome(t.Context(), hotel); err != nil {
				t.Fatalf("the real book_hotel_done after a restart: %v", err)
			}
			if s := tripState(t, r, "t1"); s.Status != trip.StatusConfirmed {
				t.Fatalf("trip %+v, want confirmed", s)
			}
		})
	}
}

// TestOutcomeOnAStaleCacheReadsTheTail: another node issued the command; the
// node receiving the outcome must see it before judging.
func TestOutcomeOnAStaleCacheReadsTheTail(t *testing.T) {
	st := newTripStore(t, natstest.RunServer(t))
	a, b := st.repo(t, aggregate.Config{}), st.repo(t, aggregate.Config{})
	req, _ := json.Marshal(trip.RequestTrip{Traveler: "ada", Destination: "Lisbon", Budget: 100_000, FlightPrice: 40_000, HotelPrice: 30_000})
	if _, err := b.Handle(t.Context(), aggregate.Request{Type: trip.Type, ID: "t1", Kind: trip.KindRequestTrip, Payload: req}); err != nil {
		t.Fatal(err)
	}
	tripState(t, a, "t1") // a caches version 1
	if _, err := b.HandleOutcome(t.Context(), report("t1", esjet.DoneKind(trip.KindLockBudget), esjet.Outcome{CommandID: "trip:t1:1:0"})); err != nil {
		t.Fatal(err)
	}
	if _, err := a.HandleOutcome(t.Context(), report("t1", esjet.DoneKind(trip.KindBookFlight), esjet.Outcome{CommandID: "trip:t1:2:0"})); err != nil {
		t.Fatalf("outcome on a node whose cache predates the command: %v", err)
	}
}

package trip_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/internal/aggregate"
)

// A step is a command sent to the trip.
type step struct {
	kind    string
	payload any // marshalled to JSON; a json.RawMessage is sent as is
}

func request() step {
	return step{trip.KindRequestTrip, trip.RequestTrip{
		Traveler: "ada", Destination: "Lisbon", Budget: 100_000, FlightPrice: 40_000, HotelPrice: 30_000,
	}}
}

func done(kind, result string) step {
	o := esjet.Outcome{CommandID: "trip:t1:1:0", Attempts: 1}
	if result != "" {
		o.Result = json.RawMessage(result)
	}
	return step{esjet.DoneKind(kind), o}
}

func failed(kind, msg string) step {
	return step{esjet.FailedKind(kind), esjet.Outcome{CommandID: "trip:t1:1:0", Error: msg, Attempts: 3}}
}

var (
	locked      = done(trip.KindLockBudget, "")
	flightOK    = done(trip.KindBookFlight, `{"booking_ref":"FL-1"}`)
	hotelOK     = done(trip.KindBookHotel, `{"booking_ref":"HT-1"}`)
	flightNo    = failed(trip.KindBookFlight, "no seats")
	hotelNo     = failed(trip.KindBookHotel, "fully booked")
	note        = step{trip.KindAddNote, trip.AddNote{Text: "window seat"}}
	bookingsOut = []step{request(), locked}
)

func steps(groups ...[]step) []step { return slices.Concat(groups...) }

// history runs the steps as decisions, each against the state the earlier
// ones left, and returns what they recorded as stored events (versions 1,
// 2, 3…, JSON data), so the givens go through Decide and Evolve alike.
func history(t *testing.T, steps ...step) []esjet.Event {
	t.Helper()
	var events []esjet.Event
	for i, s := range steps {
		d, err := when(t, given(events...), s)
		if err != nil {
			t.Fatalf("given step %d (%s): %v", i, s.kind, err)
		}
		events = appendDecision(t, events, d)
	}
	return events
}

func appendDecision(t *testing.T, events []esjet.Event, d esjet.Decision) []esjet.Event {
	t.Helper()
	for _, ne := range d.Events {
		data, err := json.Marshal(ne.Data)
		if err != nil {
			t.Fatalf("marshal %s: %v", ne.Type, err)
		}
		v := uint64(len(events) + 1)
		events = append(events, esjet.Event{
			ID: fmt.Sprintf("%s-%d", ne.Type, v), Type: ne.Type, Schema: 1, Version: v,
			Time: time.Unix(int64(v), 0), Data: data,
		})
	}
	return events
}

func given(events ...esjet.Event) trip.State {
	return trip.Definition().Replay(events).(trip.State)
}

func when(t *testing.T, s trip.State, st step) (esjet.Decision, error) {
	t.Helper()
	raw, ok := st.payload.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(st.payload); err != nil {
			t.Fatalf("marshal %s payload: %v", st.kind, err)
		}
	}
	return trip.Definition().Decide(s, st.kind, raw)
}

func eventTypes(d esjet.Decision) []string {
	var out []string
	for _, e := range d.Events {
		out = append(out, e.Type)
	}
	return out
}

func commandKinds(d esjet.Decision) []string {
	var out []string
	for _, c := range d.Commands {
		out = append(out, c.Kind)
	}
	return out
}

func command(t *testing.T, d esjet.Decision, kind string) esjet.NewCommand {
	t.Helper()
	for _, c := range d.Commands {
		if c.Kind == kind {
			return c
		}
	}
	t.Fatalf("no %s command in %v", kind, commandKinds(d))
	return esjet.NewCommand{}
}

func event(t *testing.T, d esjet.Decision, typ string) esjet.NewEvent {
	t.Helper()
	for _, e := range d.Events {
		if e.Type == typ {
			return e
		}
	}
	t.Fatalf("no %s event in %v", typ, eventTypes(d))
	return esjet.NewEvent{}
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name     string
		given    []step
		when     step
		events   []string // nil with commands nil and reject "": Nothing
		commands []string
		reject   string
		then     func(t *testing.T, d esjet.Decision, after trip.State)
	}{
		{
			name: "request locks the flight plus hotel amount",
			when: request(), events: []string{trip.EventTripRequested}, commands: []string{trip.KindLockBudget},
			then: func(t *testing.T, d esjet.Decision, s trip.State) {
				if got, want := command(t, d, trip.KindLockBudget).Payload, (trip.LockBudget{Traveler: "ada", Amount: 70_000}); got != want {
					t.Errorf("lock_budget payload = %+v, want %+v", got, want)
				}
				if s.Status != trip.StatusRequested || s.Amount != 70_000 || s.Budget != 100_000 || s.Flight.Price != 40_000 {
					t.Errorf("state = %+v", s)
				}
			},
		},
		{
			name:   "request over budget is rejected",
			when:   step{trip.KindRequestTrip, trip.RequestTrip{Traveler: "ada", Destination: "Oslo", Budget: 50_000, FlightPrice: 30_000, HotelPrice: 20_001}},
			reject: "budget_exceeded",
		},
		{
			name:   "request exactly at budget is accepted",
			when:   step{trip.KindRequestTrip, trip.RequestTrip{Traveler: "ada", Destination: "Oslo", Budget: 50_000, FlightPrice: 30_000, HotelPrice: 20_000}},
			events: []string{trip.EventTripRequested}, commands: []string{trip.KindLockBudget},
		},
		{
			name:   "request with huge prices does not overflow into acceptance",
			when:   step{trip.KindRequestTrip, trip.RequestTrip{Traveler: "ada", Destination: "Oslo", Budget: 1 << 62, FlightPrice: 1 << 62, HotelPrice: 1 << 62}},
			reject: "budget_exceeded",
		},
		{
			name:   "request without a traveler is invalid",
			when:   step{trip.KindRequestTrip, trip.RequestTrip{Traveler: " ", Destination: "Oslo", Budget: 10, FlightPrice: 1, HotelPrice: 1}},
			reject: "invalid_request",
		},
		{
			name:   "request with a zero price is invalid",
			when:   step{trip.KindRequestTrip, trip.RequestTrip{Traveler: "ada", Destination: "Oslo", Budget: 10, FlightPrice: 0, HotelPrice: 1}},
			reject: "invalid_request",
		},
		{
			name:   "request with a negative budget is invalid",
			when:   step{trip.KindRequestTrip, trip.RequestTrip{Traveler: "ada", Destination: "Oslo", Budget: -1, FlightPrice: 1, HotelPrice: 1}},
			reject: "invalid_request",
		},
		{
			name:  "a second request is rejected",
			given: []step{request()}, when: request(), reject: "already_requested",
		},
		{
			name:  "a request on a rejected trip is rejected",
			given: []step{request(), failed(trip.KindLockBudget, "insufficient funds")}, when: request(), reject: "already_requested",
		},
		{
			name:  "budget locked books both legs",
			given: []step{request()}, when: locked,
			events: []string{trip.EventBudgetLocked}, commands: []string{trip.KindBookFlight, trip.KindBookHotel},
			then: func(t *testing.T, d esjet.Decision, s trip.State) {
				if got, want := command(t, d, trip.KindBookFlight).Payload, (trip.BookFlight{Traveler: "ada", Destination: "Lisbon", Price: 40_000}); got != want {
					t.Errorf("book_flight payload = %+v, want %+v", got, want)
				}
				if got, want := command(t, d, trip.KindBookHotel).Payload, (trip.BookHotel{Traveler: "ada", Destination: "Lisbon", Price: 30_000}); got != want {
					t.Errorf("book_hotel payload = %+v, want %+v", got, want)
				}
				if s.Status != trip.StatusBudgetLocked || s.BudgetStatus != trip.BudgetStatusLocked ||
					s.Flight.Status != trip.LegStatusPending || s.Hotel.Status != trip.LegStatusPending {
					t.Errorf("state = %+v", s)
				}
			},
		},
		{
			name:  "budget lock failure rejects the trip with nothing to compensate",
			given: []step{request()}, when: failed(trip.KindLockBudget, "insufficient funds"),
			events: []string{trip.EventTripRejected},
			then: func(t *testing.T, d esjet.Decision, s trip.State) {
				if s.Status != trip.StatusRejected || !strings.Contains(s.Reason, "insufficient funds") {
					t.Errorf("state = %+v", s)
				}
			},
		},
		{
			name:  "a second budget lock outcome is unexpected",
			given: bookingsOut, when: locked, reject: "unexpected_outcome",
		},
		{
			name: "an outcome on a trip never requested is unexpected",
			when: flightOK, reject: "unexpected_outcome",
		},
		{
			name:  "a booking outcome before the budget is locked is unexpected",
			given: []step{request()}, when: hotelOK, reject: "unexpected_outcome",
		},
		{
			name:  "flight then hotel confirms the trip",
			given: steps(bookingsOut, []step{flightOK}), when: hotelOK,
			events: []string{trip.EventHotelBooked, trip.EventTripConfirmed},
			then: func(t *testing.T, d esjet.Decision, s trip.State) {
				if s.Status != trip.StatusConfirmed || s.Flight.BookingRef != "FL-1" || s.Hotel.BookingRef != "HT-1" {
					t.Errorf("state = %+v", s)
				}
			},
		},
		{
			name:  "hotel then flight confirms the trip",
			given: steps(bookingsOut, []step{hotelOK}), when: flightOK,
			events: []string{trip.EventFlightBooked, trip.EventTripConfirmed},
			then: func(t *testing.T, d esjet.Decision, s trip.State) {
				if got := event(t, d, trip.EventFlightBooked).Data; got != (trip.LegBooked{BookingRef: "FL-1"}) {
					t.Errorf("flight_booked data = %+v", got)
				}
				if s.Status != trip.StatusConfirmed {
					t.Errorf("status = %q, want confirmed", s.Status)
				}
			},
		},
		{
			name:  "the first booking alone does not confirm",
			given: bookingsOut, when: flightOK, events: []string{trip.EventFlightBooked},
			then: func(t *testing.T, d esjet.Decision, s trip.State) {
				if s.Status != trip.StatusBudgetLocked || s.Flight.Status != trip.LegStatusBooked {
					t.Errorf("state = %+v", s)
				}
			},
		},
		{
			name:  "a booking result without a ref is tolerated",
			given: bookingsOut, when: done(trip.KindBookFlight, ""), events: []string{trip.EventFlightBooked},
			then: func(t *testing.T, d esjet.Decision, s trip.State) {
				if s.Flight.Status != trip.LegStatusBooked || s.Flight.BookingRef != "" {
					t.Errorf("flight = %+v", s.Flight)
				}
			},
		},
		{
			name:  "a duplicate booking outcome decides nothing",
			given: steps(bookingsOut, []step{flightOK}), when: flightOK,
		},
		{
			name:  "a duplicate booking outcome on a confirmed trip decides nothing",
			given: steps(bookingsOut, []step{flightOK, hotelOK}), when: hotelOK,
		},
		{
			name:  "flight fails with the hotel booked: release the budget and cancel the hotel",
			given: steps(bookingsOut, []step{hotelOK}), when: flightNo,
			events:   []string{trip.EventFlightFailed, trip.EventTripCancelled},
			commands: []string{trip.KindReleaseBudget, trip.KindCancelHotel},
			then: func(t *testing.T, d esjet.Decision, s trip.State) {
				if got, want := command(t, d, trip.KindReleaseBudget).Payload, (trip.ReleaseBudget{Traveler: "ada", Amount: 70_000}); got != want {
					t.Errorf("release_budget payload = %+v, want %+v", got, want)
				}
				if got, want := command(t, d, trip.KindCancelHotel).Payload, (trip.CancelHotel{BookingRef: "HT-1"}); got != want {
					t.Errorf("cancel_hotel payload = %+v, want %+v", got, want)
				}
				if got := event(t, d, trip.EventFlightFailed).Data; got != (trip.LegFailed{Error: "no seats"}) {
					t.Errorf("flight_failed data = %+v", got)
				}
				if s.Status != trip.StatusCancelled || s.Flight.Status != trip.LegStatusFailed || s.Flight.Error != "no seats" {
					t.Errorf("state = %+v", s)
				}
			},
		},
		{
			name:  "hotel fails with the flight pending: release the budget only",
			given: bookingsOut, when: hotelNo,
			events:   []string{trip.EventHotelFailed, trip.EventTripCancelled},
			commands: []string{trip.KindReleaseBudget},
		},
		{
			name:  "a late flight success on a cancelled trip is cancelled",
			given: steps(bookingsOut, []step{hotelNo}), when: flightOK,
			events: []string{trip.EventFlightBooked}, commands: []string{trip.KindCancelFlight},
			then: func(t *testing.T, d esjet.Decision, s trip.State) {
				if got, want := command(t, d, trip.KindCancelFlight).Payload, (trip.CancelFlight{BookingRef: "FL-1"}); got != want {
					t.Errorf("cancel_flight payload = %+v, want %+v", got, want)
				}
				if s.Status != trip.StatusCancelled || s.Flight.Status != trip.LegStatusBooked {
					t.Errorf("state = %+v", s)
				}
			},
		},
		{
			name:  "a late hotel success on a cancelled trip is cancelled",
			given: steps(bookingsOut, []step{flightNo}), when: hotelOK,
			events: []string{trip.EventHotelBooked}, commands: []string{trip.KindCancelHotel},
		},
		{
			name:  "a duplicate late success is not cancelled twice",
			given: steps(bookingsOut, []step{hotelNo, flightOK}), when: flightOK,
		},
		{
			name:  "the second leg failing after cancellation compensates nothing more",
			given: steps(bookingsOut, []step{hotelNo}), when: flightNo,
			events: []string{trip.EventFlightFailed},
			then: func(t *testing.T, d esjet.Decision, s trip.State) {
				if s.Status != trip.StatusCancelled || !strings.HasPrefix(s.Reason, "hotel") {
					t.Errorf("state = %+v", s)
				}
			},
		},
		{
			name:  "a duplicate booking failure decides nothing",
			given: steps(bookingsOut, []step{hotelNo}), when: hotelNo,
		},
		{
			name:  "a booking failure after success is unexpected",
			given: steps(bookingsOut, []step{flightOK}), when: flightNo, reject: "unexpected_outcome",
		},
		{
			name:  "budget released",
			given: steps(bookingsOut, []step{hotelNo}), when: done(trip.KindReleaseBudget, ""),
			events: []string{trip.EventBudgetReleased},
			then: func(t *testing.T, d esjet.Decision, s trip.State) {
				if s.BudgetStatus != trip.BudgetStatusReleased || s.Status != trip.StatusCancelled {
					t.Errorf("state = %+v", s)
				}
			},
		},
		{
			name:  "a duplicate release outcome decides nothing",
			given: steps(bookingsOut, []step{hotelNo, done(trip.KindReleaseBudget, "")}), when: done(trip.KindReleaseBudget, ""),
		},
		{
			name:  "a release outcome on a live trip is unexpected",
			given: bookingsOut, when: done(trip.KindReleaseBudget, ""), reject: "unexpected_outcome",
		},
		{
			name:  "hotel cancelled",
			given: steps(bookingsOut, []step{hotelOK, flightNo}), when: done(trip.KindCancelHotel, ""),
			events: []string{trip.EventHotelCancelled},
			then: func(t *testing.T, d esjet.Decision, s trip.State) {
				if s.Hotel.Status != trip.LegStatusCancelled || s.Hotel.BookingRef != "HT-1" {
					t.Errorf("hotel = %+v", s.Hotel)
				}
			},
		},
		{
			name:  "late flight cancelled",
			given: steps(bookingsOut, []step{hotelNo, flightOK}), when: done(trip.KindCancelFlight, ""),
			events: []string{trip.EventFlightCancelled},
		},
		{
			name:  "a cancel outcome for a leg never cancelled is unexpected",
			given: steps(bookingsOut, []step{flightOK, hotelOK}), when: done(trip.KindCancelFlight, ""), reject: "unexpected_outcome",
		},
		{
			name:  "a failed release is a compensation failure",
			given: steps(bookingsOut, []step{flightNo}), when: failed(trip.KindReleaseBudget, "ledger down"),
			events: []string{trip.EventCompensationFailed},
			then: func(t *testing.T, d esjet.Decision, s trip.State) {
				if got, want := event(t, d, trip.EventCompensationFailed).Data, (trip.CompensationFailed{Command: trip.KindReleaseBudget, Error: "ledger down"}); got != want {
					t.Errorf("compensation_failed data = %+v, want %+v", got, want)
				}
				if s.Status != trip.StatusCancelled || !slices.Equal(s.CompensationFailures, []string{trip.KindReleaseBudget}) {
					t.Errorf("state = %+v", s)
				}
			},
		},
		{
			name:  "a failed hotel cancel is a compensation failure",
			given: steps(bookingsOut, []step{hotelOK, flightNo, failed(trip.KindReleaseBudget, "ledger down")}),
			when:  failed(trip.KindCancelHotel, "hotel unreachable"), events: []string{trip.EventCompensationFailed},
			then: func(t *testing.T, d esjet.Decision, s trip.State) {
				if !slices.Equal(s.CompensationFailures, []string{trip.KindReleaseBudget, trip.KindCancelHotel}) {
					t.Errorf("compensation failures = %v", s.CompensationFailures)
				}
			},
		},
		{
			name:  "a duplicate compensation failure decides nothing",
			given: steps(bookingsOut, []step{hotelNo, flightOK, failed(trip.KindCancelFlight, "x")}), when: failed(trip.KindCancelFlight, "x"),
		},
		{
			name:  "a compensation failure for a compensation never issued is unexpected",
			given: steps(bookingsOut, []step{hotelNo}), when: failed(trip.KindCancelFlight, "x"), reject: "unexpected_outcome",
		},
		{
			name: "a note on a missing trip is not found",
			when: note, reject: "not_found",
		},
		{
			name:  "a note on an existing trip adds one event",
			given: []step{request(), note}, when: note, events: []string{trip.EventNoteAdded},
			then: func(t *testing.T, d esjet.Decision, s trip.State) {
				if s.Notes != 2 {
					t.Errorf("notes = %d, want 2", s.Notes)
				}
			},
		},
		{
			name:  "a note on a cancelled trip is accepted",
			given: steps(bookingsOut, []step{flightNo}), when: note, events: []string{trip.EventNoteAdded},
		},
		{
			name:  "an empty note is invalid",
			given: []step{request()}, when: step{trip.KindAddNote, trip.AddNote{}}, reject: "invalid_note",
		},
		{
			name:  "a note of 500 characters is accepted",
			given: []step{request()}, when: step{trip.KindAddNote, trip.AddNote{Text: strings.Repeat("é", trip.MaxNoteLen)}},
			events: []string{trip.EventNoteAdded},
		},
		{
			name:  "a note of 501 characters is invalid",
			given: []step{request()}, when: step{trip.KindAddNote, trip.AddNote{Text: strings.Repeat("a", trip.MaxNoteLen+1)}},
			reject: "invalid_note",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := history(t, tt.given...)
			d, err := when(t, given(events...), tt.when)
			if tt.reject != "" {
				var r *esjet.Rejection
				if !errors.As(err, &r) || r.Code != tt.reject {
					t.Fatalf("err = %v, want rejection %q", err, tt.reject)
				}
				if !errors.Is(err, aggregate.ErrRejected) {
					t.Errorf("rejection does not wrap ErrRejected: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("decide: %v", err)
			}
			if got := eventTypes(d); !slices.Equal(got, tt.events) {
				t.Errorf("events = %v, want %v", got, tt.events)
			}
			if got := commandKinds(d); !slices.Equal(got, tt.commands) {
				t.Errorf("commands = %v, want %v", got, tt.commands)
			}
			for _, c := range d.Commands {
				if !c.Report || !c.DeliverAfter.IsZero() {
					t.Errorf("command %s: Report = %v, DeliverAfter = %v; want reported, now", c.Kind, c.Report, c.DeliverAfter)
				}
			}
			if tt.then != nil {
				tt.then(t, d, given(appendDecision(t, events, d)...))
			}
		})
	}
}

func TestDecideUnknownCommand(t *testing.T) {
	_, err := when(t, given(), step{"book_train", struct{}{}})
	if !errors.Is(err, aggregate.ErrUnknownCommand) {
		t.Fatalf("err = %v, want ErrUnknownCommand", err)
	}
}

func TestDecidePayloadIsStrict(t *testing.T) {
	for _, raw := range []string{
		`{"traveler":"ada","destination":"Oslo","budget":10,"flight_price":1,"hotel_price":1,"currency":"EUR"}`,
		`{"traveler":"ada","budget":"ten"}`,
		`{"traveler":`,
	} {
		_, err := when(t, given(), step{trip.KindRequestTrip, json.RawMessage(raw)})
		if !errors.Is(err, aggregate.ErrBadCommand) {
			t.Errorf("%s: err = %v, want ErrBadCommand", raw, err)
		}
	}
	// Outcomes decode strictly too.
	events := history(t, request())
	_, err := when(t, given(events...), step{esjet.DoneKind(trip.KindLockBudget), json.RawMessage(`{"command_id":"x","extra":1}`)})
	if !errors.Is(err, aggregate.ErrBadCommand) {
		t.Errorf("outcome with an unknown field: err = %v, want ErrBadCommand", err)
	}
}

func TestEvolveIsPure(t *testing.T) {
	events := history(t, steps(bookingsOut, []step{
		hotelOK, flightNo, failed(trip.KindReleaseBudget, "ledger down"),
	})...)
	first, second := given(events...), given(events...)
	if !reflect.DeepEqual(first, second) {
		t.Fatalf("replaying twice differs:\n%+v\n%+v", first, second)
	}
	snapshot := given(events...)

	// Evolve further from first: the new failure must not land in first's
	// slice, even when that slice has spare capacity.
	first.CompensationFailures = slices.Grow(first.CompensationFailures, 4)
	d, err := when(t, first, failed(trip.KindCancelHotel, "hotel unreachable"))
	if err != nil {
		t.Fatal(err)
	}
	more := appendDecision(t, slices.Clone(events), d)
	later := first
	for _, e := range more[len(events):] {
		later = trip.Evolve(later, e)
	}
	if !slices.Equal(later.CompensationFailures, []string{trip.KindReleaseBudget, trip.KindCancelHotel}) {
		t.Fatalf("later failures = %v", later.CompensationFailures)
	}
	if !reflect.DeepEqual(first, snapshot) {
		t.Errorf("first state changed after evolving further:\n%+v\nwant\n%+v", first, snapshot)
	}
	if got := first.CompensationFailures[:cap(first.CompensationFailures)][1]; got != "" {
		t.Errorf("evolve wrote %q into the previous state's spare capacity", got)
	}
}

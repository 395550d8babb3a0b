package trip

import (
	"encoding/json"
	"testing"

	"github.com/esjet/esjet"
)

// The trip's next shape (issue 32's rolling upgrade): trip_requested
// records its currency, book_hotel goes out at payload schema 2 with
// price_cents, and an older trip_requested is read with the currency
// filled in.
func TestTheNextShapeVersionsItsEventAndItsHotelCommand(t *testing.T) {
	c := RequestTrip{Traveler: "ada", Destination: "Lisbon", Budget: 100000, FlightPrice: 40000, HotelPrice: 30000}
	d, err := requestTripNext(State{}, c)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := d.Events[0].Data.(TripRequested); !ok || r.Currency != Currency {
		t.Fatalf("trip_requested %+v: want currency %s", d.Events[0].Data, Currency)
	}
	s := State{Status: StatusRequested, Traveler: "ada", Destination: "Lisbon", Amount: 70000,
		Flight: Leg{Price: 40000}, Hotel: Leg{Price: 30000}}
	d, err = lockBudgetDoneNext(s, esjet.Outcome{})
	if err != nil {
		t.Fatal(err)
	}
	var hotel, flights int
	for _, c := range d.Commands {
		switch c.Kind {
		case KindBookHotel:
			hotel++
			if p, ok := c.Payload.(BookHotelV2); !ok || c.Schema != HotelSchema || p.PriceCents != 30000 {
				t.Errorf("book_hotel %+v: want BookHotelV2 at schema %d, 30000 cents", c, HotelSchema)
			}
		case KindBookFlight:
			flights++
			if c.Schema != 0 {
				t.Errorf("book_flight at schema %d, want 1", c.Schema)
			}
		}
	}
	if hotel != 1 || flights != 1 {
		t.Fatalf("commands %+v", d.Commands)
	}
	v3, err := upcastTripRequestedV3(json.RawMessage(`{"traveler":"ada","budget_cents":1}`))
	if err != nil || string(v3) != `{"budget_cents":1,"currency":"EUR","traveler":"ada"}` {
		t.Fatalf("upcast: %s, %v", v3, err)
	}
	if WorkerSchemas(true)[KindBookHotel] != HotelSchema || WorkerSchemas(false)[KindBookHotel] != 0 {
		t.Fatal("worker schemas")
	}
	_ = NextDefinition() // registers without a panic
}

// The next shape adds a command kind: the decision that confirms a trip
// fires send_itinerary (no outcome reported); today's shape does not, and
// a decision that does not confirm the trip fires nothing.
func TestTheNextShapeSendsTheItineraryOfAConfirmedTrip(t *testing.T) {
	s := State{Status: StatusBudgetLocked, Traveler: "ada", Destination: "Lisbon",
		Flight: Leg{Status: LegStatusBooked}, Hotel: Leg{Status: LegStatusPending}}
	done := esjet.Outcome{Result: json.RawMessage(`{"booking_ref":"HT-1"}`)}
	itineraries := func(d esjet.Decision) (n int) {
		for _, c := range d.Commands {
			if c.Kind == KindSendItinerary {
				n++
				if p, ok := c.Payload.(SendItinerary); !ok || p.Traveler != "ada" || p.Destination != "Lisbon" || c.Report {
					t.Errorf("send_itinerary %+v: want ada's Lisbon itinerary, not reported", c)
				}
			}
		}
		return n
	}
	next, err := bookDoneNext(hotel, flight)(s, done)
	if err != nil || itineraries(next) != 1 {
		t.Fatalf("next shape, hotel booked after the flight: %+v, %v; want one send_itinerary", next, err)
	}
	today, err := bookDone(hotel, flight)(s, done)
	if err != nil || itineraries(today) != 0 {
		t.Fatalf("today's shape: %+v, %v; want no send_itinerary", today, err)
	}
	s.Flight.Status = LegStatusPending // the flight still pending: not confirmed yet
	if d, err := bookDoneNext(hotel, flight)(s, done); err != nil || itineraries(d) != 0 {
		t.Fatalf("next shape, flight pending: %+v, %v; want no send_itinerary", d, err)
	}
}

package trip

import (
	"encoding/json"

	"github.com/esjet/esjet"
)

// The trip's next shape: what a newer build of the demo changes, so that a
// fleet can be upgraded from today's trip to it one node at a time (the
// rolling-upgrade test in e2e, docs/schema-evolution.md). `esjet run` serves
// it with demo.build: next.
//
//   - trip_requested is at schema 3: it names the currency of its amounts
//     (an upcaster fills in "EUR" for the older versions).
//   - book_hotel is issued at payload schema 2: its price is "price_cents"
//     ([BookHotelV2]). Workers that understand only schema 1 leave it for a
//     worker that understands 2 (workers.book_hotel.schema: 2), counting no
//     attempt; see [WorkerSchemas].
//   - a new command kind: a confirmed trip fires send_itinerary
//     ([SendItinerary], no outcome reported). Today's build has no worker
//     for it, so it waits in OUTBOX until a node of the next build serves
//     it ([NextKinds]).

// Currency is what the next shape records on every trip.
const Currency = "EUR"

// HotelSchema is the payload schema of book_hotel in the next shape.
const HotelSchema = 2

// KindSendItinerary is the command kind the next shape adds: the
// traveler is sent the confirmed trip's itinerary.
const KindSendItinerary = "send_itinerary"

// NextKinds are the command kinds only the next shape issues: a node of
// today's build has no worker for them.
var NextKinds = []string{KindSendItinerary}

// SendItinerary is send_itinerary's payload.
type SendItinerary struct {
	Traveler    string `json:"traveler" esjet:"personal,subject=traveler"`
	Destination string `json:"destination"`
}

// BookHotelV2 is book_hotel's payload at schema 2.
type BookHotelV2 struct {
	Traveler    string `json:"traveler" esjet:"personal,subject=traveler"`
	Destination string `json:"destination"`
	PriceCents  int64  `json:"price_cents"`
}

// NextDefinition returns the trip's next shape, ready to register with a
// node.
func NextDefinition() *esjet.Definition { return define(true) }

// WorkerSchemas is the payload schema a node's workers must understand,
// by kind, to carry out what the trip (next: its next shape) issues; kinds
// it leaves out are at 1.
func WorkerSchemas(next bool) map[string]int {
	if next {
		return map[string]int{KindBookHotel: HotelSchema}
	}
	return nil
}

// upcastTripRequested turns a trip_requested of schema version 1 into
// version 2, which names the budget's unit: "budget" → "budget_cents".
func upcastTripRequested(data json.RawMessage) (json.RawMessage, error) {
	var v map[string]json.RawMessage
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	v["budget_cents"] = v["budget"]
	delete(v, "budget")
	return json.Marshal(v)
}

// upcastTripRequestedV3 turns a trip_requested of schema version 2 into
// version 3: the amounts were always in euros.
func upcastTripRequestedV3(data json.RawMessage) (json.RawMessage, error) {
	var v map[string]json.RawMessage
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	if _, ok := v["currency"]; !ok {
		v["currency"] = json.RawMessage(`"` + Currency + `"`)
	}
	return json.Marshal(v)
}

// requestTripNext records trip_requested at schema 3.
func requestTripNext(s State, c RequestTrip) (esjet.Decision, error) {
	d, err := requestTrip(s, c)
	if err != nil {
		return d, err
	}
	for i, e := range d.Events {
		if r, ok := e.Data.(TripRequested); ok {
			r.Currency = Currency
			d.Events[i].Data = r
		}
	}
	return d, nil
}

// lockBudgetDoneNext issues book_hotel at payload schema 2.
func lockBudgetDoneNext(s State, o esjet.Outcome) (esjet.Decision, error) {
	d, err := lockBudgetDone(s, o)
	if err != nil {
		return d, err
	}
	for i, c := range d.Commands {
		if c.Kind == KindBookHotel {
			d.Commands[i].Payload = BookHotelV2{Traveler: s.Traveler, Destination: s.Destination, PriceCents: s.Hotel.Price}
			d.Commands[i].Schema = HotelSchema
		}
	}
	return d, nil
}

// bookDoneNext is bookDone that also fires send_itinerary when the trip is
// confirmed.
func bookDoneNext(me, other leg) func(State, esjet.Outcome) (esjet.Decision, error) {
	done := bookDone(me, other)
	return func(s State, o esjet.Outcome) (esjet.Decision, error) {
		d, err := done(s, o)
		if err != nil {
			return d, err
		}
		for _, e := range d.Events {
			if e.Type == EventTripConfirmed {
				return d.Fire(KindSendItinerary, SendItinerary{Traveler: s.Traveler, Destination: s.Destination}), nil
			}
		}
		return d, nil
	}
}

package trip

import (
	"context"

	"github.com/esjet/esjet"
)

// The trip's read models, which `esjet run` runs:
//
//   - trips_by_status: a document <status>/<trip id> per trip, in the folder
//     of its current status (list with prefix "requested/" for the trips
//     still waiting), and trip/<trip id> with the trip's summary.
//   - traveler_spend: a document per traveler: trips requested, confirmed
//     and cancelled, and the cents spent on confirmed trips. Partitioned by
//     trip: the partitions share the travelers' documents.
const (
	ViewTripsByStatus = "trips_by_status"
	ViewTravelerSpend = "traveler_spend"
)

// TripSummary is a trip/<id> document of trips_by_status (and, without
// Status, traveler_spend's memory of a trip's traveler and amount).
type TripSummary struct {
	ID          string `json:"id"`
	Status      string `json:"status,omitempty"`
	Traveler    string `json:"traveler"`
	Destination string `json:"destination,omitempty"`
	Amount      int64  `json:"amount"` // cents: flight + hotel price
	Position    uint64 `json:"position"`
}

// Spend is a traveler_spend document.
type Spend struct {
	Traveler  string `json:"traveler"`
	Requested int    `json:"requested"`
	Confirmed int    `json:"confirmed"`
	Cancelled int    `json:"cancelled"` // cancelled or rejected
	Spent     int64  `json:"spent"`     // cents, confirmed trips
}

// statusOf is the status an event moves a trip to ("" for none).
var statusOf = map[string]string{
	EventTripRequested: StatusRequested,
	EventBudgetLocked:  StatusBudgetLocked,
	EventTripConfirmed: StatusConfirmed,
	EventTripCancelled: StatusCancelled,
	EventTripRejected:  StatusRejected,
}

// Views returns the trip's projections.
func Views() []esjet.Projection {
	types := make([]string, 0, len(statusOf))
	for t := range statusOf {
		types = append(types, t)
	}
	return []esjet.Projection{
		{Name: ViewTripsByStatus, AggregateTypes: []string{Type}, EventTypes: types, Handle: byStatus, Personal: true},
		{Name: ViewTravelerSpend, AggregateTypes: []string{Type}, EventTypes: types, Partitions: 2, Handle: spend, Personal: true},
	}
}

// byStatus moves the trip's document into its new status's folder.
func byStatus(_ context.Context, tx *esjet.ViewTx, e esjet.ProjectionEvent) error {
	var s TripSummary
	if _, err := tx.Get("trip/"+e.AggregateID, &s); err != nil {
		return err
	}
	if e.Type == EventTripRequested {
		var r TripRequested
		if err := e.Decode(&r); err != nil {
			return err
		}
		s = TripSummary{ID: e.AggregateID, Traveler: r.Traveler, Destination: r.Destination, Amount: r.FlightPrice + r.HotelPrice}
	}
	if s.Status != "" {
		if err := tx.Delete(s.Status + "/" + e.AggregateID); err != nil {
			return err
		}
	}
	s.Status, s.Position = statusOf[e.Type], e.Position
	if err := tx.Put(s.Status+"/"+e.AggregateID, s); err != nil {
		return err
	}
	return tx.Put("trip/"+e.AggregateID, s)
}

// spend counts a traveler's trips and what the confirmed ones cost.
func spend(_ context.Context, tx *esjet.ViewTx, e esjet.ProjectionEvent) error {
	var t TripSummary
	if e.Type == EventTripRequested {
		var r TripRequested
		if err := e.Decode(&r); err != nil {
			return err
		}
		t = TripSummary{ID: e.AggregateID, Traveler: r.Traveler, Amount: r.FlightPrice + r.HotelPrice}
		if err := tx.Put("trip/"+e.AggregateID, t); err != nil {
			return err
		}
	} else if found, err := tx.Get("trip/"+e.AggregateID, &t); err != nil || !found {
		return err // a trip requested before the view existed cannot be: it reads from the start
	}
	var s Spend
	key := travelerKey(t.Traveler)
	if _, err := tx.Get(key, &s); err != nil {
		return err
	}
	s.Traveler = t.Traveler
	switch e.Type {
	case EventTripRequested:
		s.Requested++
	case EventTripConfirmed:
		s.Confirmed++
		s.Spent += t.Amount
	case EventTripCancelled, EventTripRejected:
		s.Cancelled++
	default:
		return nil
	}
	return tx.Put(key, s)
}

// travelerKey is a traveler's document key: the name, with what a key may
// not hold replaced by '_'.
func travelerKey(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '=') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b[:min(len(b), 200)])
}

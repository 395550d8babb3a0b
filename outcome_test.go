package esjet_test

import (
	"errors"
	"testing"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/esjettest"
)

// TestNodeSendRefusesOutcomes: the Go API is a public path like HTTP and
// micro: an outcome sent through it is refused and writes nothing.
func TestNodeSendRefusesOutcomes(t *testing.T) {
	n := esjettest.Start(t, trip.Definition())
	req := trip.RequestTrip{Traveler: "ada", Destination: "Lisbon", Budget: 100_000, FlightPrice: 40_000, HotelPrice: 30_000}
	if _, err := n.Send(t.Context(), trip.Type, "t1", trip.KindRequestTrip, req); err != nil {
		t.Fatal(err)
	}
	_, err := n.Send(t.Context(), trip.Type, "t1", esjet.DoneKind(trip.KindLockBudget), esjet.Outcome{CommandID: "trip:t1:1:0"},
		esjet.WithIdempotencyKey("trip:t1:1:0/done"))
	if !errors.Is(err, esjet.ErrOutcomeNotSendable) {
		t.Fatalf("Send(lock_budget_done) = %v, want ErrOutcomeNotSendable", err)
	}
	h, err := n.Events(t.Context(), trip.Type, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != 1 {
		t.Fatalf("trip at version %d after the refused outcome, want 1", h.Version)
	}
}

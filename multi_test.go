package esjet_test

import (
	"errors"
	"testing"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/esjettest"
)

// SendAll appends to every aggregate or none; a stale expected version
// names its aggregate.
func TestNodeSendAll(t *testing.T) {
	n := esjettest.Start(t, trip.Definition())
	req := trip.RequestTrip{Traveler: "ada", Destination: "Lisbon", Budget: 100_000, FlightPrice: 40_000, HotelPrice: 30_000}
	res, err := n.SendAll(t.Context(), []esjet.MultiCommand{
		{Type: trip.Type, ID: "m1", Kind: trip.KindRequestTrip, Payload: req},
		{Type: trip.Type, ID: "m2", Kind: trip.KindRequestTrip, Payload: req},
	})
	if err != nil || len(res) != 2 || res[1].Seq != res[0].Seq+1 {
		t.Fatalf("SendAll = %+v, %v", res, err)
	}
	zero := uint64(0)
	_, err = n.SendAll(t.Context(), []esjet.MultiCommand{
		{Type: trip.Type, ID: "m3", Kind: trip.KindRequestTrip, Payload: req, ExpectedVersion: &zero},
		{Type: trip.Type, ID: "m2", Kind: trip.KindRequestTrip, Payload: req, ExpectedVersion: &zero},
	})
	var stale *esjet.StaleError
	if !errors.As(err, &stale) || stale.ID != "m2" || !errors.Is(err, esjet.ErrConflict) {
		t.Fatalf("stale m2: %v", err)
	}
	if _, _, err := n.State(t.Context(), trip.Type, "m3"); !errors.Is(err, esjet.ErrNotFound) {
		t.Errorf("m3 after the refused request: %v, want not found", err)
	}
}

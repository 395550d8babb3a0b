package trip_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/esjettest"
)

// TestViewsFollowTheSaga: trips_by_status and traveler_spend show a
// confirmed and a cancelled trip, and a read after a command's position
// sees the command's own write at once.
func TestViewsFollowTheSaga(t *testing.T) {
	ok := func(result string) esjet.Handler {
		return esjet.HandlerFunc(func(context.Context, esjet.Delivery) (json.RawMessage, error) {
			return json.RawMessage(result), nil
		})
	}
	handlers := map[string]esjet.Handler{
		trip.KindLockBudget: ok(`{}`), trip.KindReleaseBudget: ok(`{}`), trip.KindCancelFlight: ok(`{}`),
		trip.KindCancelHotel: ok(`{}`), trip.KindBookHotel: ok(`{"booking_ref":"HT-1"}`),
		trip.KindBookFlight: esjet.HandlerFunc(func(_ context.Context, d esjet.Delivery) (json.RawMessage, error) {
			if d.AggregateID == "t2" {
				return nil, esjet.Terminal(errors.New("no seats"))
			}
			return json.RawMessage(`{"booking_ref":"FL-1"}`), nil
		}),
	}
	cfg := esjettest.Config(t)
	cfg.Demo.Services = false
	n, err := esjet.Start(t.Context(), esjet.Options{Config: cfg, Aggregates: []*esjet.Definition{trip.Definition()},
		Handlers: handlers, Projections: trip.Views()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	var res esjet.Result
	for _, id := range []string{"t1", "t2"} {
		if res, err = n.Send(t.Context(), trip.Type, id, trip.KindRequestTrip, trip.RequestTrip{
			Traveler: "ada", Destination: "Lisbon", Budget: 1000, FlightPrice: 400, HotelPrice: 300,
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Read your write: the request is in the view as soon as the wait ends
	// (traveler_spend is partitioned by trip: t1's partition may lag, so
	// only t2's own request is sure to be counted).
	doc, err := n.View(t.Context(), trip.ViewTravelerSpend, "ada", esjet.After(res.Position, 10*time.Second))
	if err != nil {
		t.Fatalf("read after position %d: %v", res.Position, err)
	}
	var s trip.Spend
	_ = json.Unmarshal(doc.Value, &s)
	if s.Requested < 1 {
		t.Fatalf("after the requests: %+v", s)
	}
	if doc, err := n.View(t.Context(), trip.ViewTripsByStatus, "trip/t2", esjet.After(res.Position, 10*time.Second)); err != nil || !strings.Contains(string(doc.Value), `"traveler":"ada"`) {
		t.Fatalf("trip/t2 after position %d: %s, %v", res.Position, doc.Value, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err1 := n.View(t.Context(), trip.ViewTripsByStatus, "confirmed/t1")
		_, err2 := n.View(t.Context(), trip.ViewTripsByStatus, "cancelled/t2")
		doc, _ := n.View(t.Context(), trip.ViewTravelerSpend, "ada")
		_ = json.Unmarshal(doc.Value, &s)
		if err1 == nil && err2 == nil && s.Requested == 2 && s.Confirmed == 1 && s.Cancelled == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("views: confirmed/t1 %v, cancelled/t2 %v, spend %+v", err1, err2, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s.Spent != 700 {
		t.Fatalf("ada spent %d, want 700", s.Spent)
	}
	page, err := n.ViewList(t.Context(), trip.ViewTripsByStatus, esjet.ViewQuery{Prefix: "requested/"})
	if err != nil || len(page.Docs) != 0 {
		t.Fatalf("trips still requested: %+v, %v", page.Docs, err)
	}
	if _, err := n.View(t.Context(), trip.ViewTripsByStatus, "requested/t1"); !errors.Is(err, esjet.ErrNoDocument) {
		t.Fatalf("t1 left in requested/: %v", err)
	}
}

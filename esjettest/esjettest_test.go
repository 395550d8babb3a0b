package esjettest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/esjettest"
)

func TestStartGivesAWorkingNodeInOneLine(t *testing.T) {
	n := esjettest.Start(t, trip.Definition())
	res, err := n.Send(t.Context(), trip.Type, "t1", trip.KindRequestTrip, trip.RequestTrip{
		Traveler: "ada", Destination: "Lisbon", Budget: 1000, FlightPrice: 400, HotelPrice: 300,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Version != 1 || res.Commands[0].Kind != trip.KindLockBudget {
		t.Fatalf("result = %+v", res)
	}
	st, v, err := n.State(t.Context(), trip.Type, "t1")
	if err != nil || v != 1 || st.(trip.State).Status != trip.StatusRequested {
		t.Fatalf("state = %+v v%d %v", st, v, err)
	}
	if _, err := n.Send(t.Context(), trip.Type, "t1", "fly", nil); !errors.Is(err, esjet.ErrUnknownCommand) {
		t.Fatalf("unknown command: %v", err)
	}
	resp, err := http.Get("http://" + n.HTTPAddr() + "/readyz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("readyz: %v %v", resp, err)
	}
	resp.Body.Close()
	if n.NATSURL() == "" {
		t.Fatal("no NATS URL")
	}
}

// TestGoHandlersRunTheSagaToConfirmation registers the trip's side effects
// as Go handlers through the public API: the saga runs to the end in one
// process, with a failing-once hotel to show the retry.
func TestGoHandlersRunTheSagaToConfirmation(t *testing.T) {
	var hotelCalls atomic.Int64
	ok := func(result string) esjet.Handler {
		return esjet.HandlerFunc(func(ctx context.Context, d esjet.Delivery) (json.RawMessage, error) {
			return json.RawMessage(result), nil
		})
	}
	handlers := map[string]esjet.Handler{
		trip.KindLockBudget:    ok(`{"lock_id":"L1"}`),
		trip.KindBookFlight:    ok(`{"booking_ref":"FL-1"}`),
		trip.KindReleaseBudget: ok(`{}`),
		trip.KindCancelFlight:  ok(`{}`),
		trip.KindCancelHotel:   ok(`{}`),
		trip.KindBookHotel: esjet.HandlerFunc(func(ctx context.Context, d esjet.Delivery) (json.RawMessage, error) {
			if hotelCalls.Add(1) == 1 {
				return nil, esjet.Retry(errors.New("hotel system busy"), 10*time.Millisecond)
			}
			if d.Attempt != 2 || d.CommandID != "trip:t1:2:1" || d.AggregateVersion != 2 {
				return nil, esjet.Terminal(fmt.Errorf("unexpected delivery %+v", d))
			}
			return json.RawMessage(`{"booking_ref":"HT-1"}`), nil
		}),
	}
	cfg := esjettest.Config(t)
	cfg.Demo.Services = false
	n, err := esjet.Start(t.Context(), esjet.Options{Config: cfg, Aggregates: []*esjet.Definition{trip.Definition()}, Handlers: handlers})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	if _, err := n.Send(t.Context(), trip.Type, "t1", trip.KindRequestTrip, trip.RequestTrip{
		Traveler: "ada", Destination: "Lisbon", Budget: 1000, FlightPrice: 400, HotelPrice: 300,
	}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, _, err := n.State(t.Context(), trip.Type, "t1")
		if err == nil && st.(trip.State).Status == trip.StatusConfirmed {
			s := st.(trip.State)
			if s.Flight.BookingRef != "FL-1" || s.Hotel.BookingRef != "HT-1" {
				t.Fatalf("booking refs %q %q", s.Flight.BookingRef, s.Hotel.BookingRef)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trip not confirmed: %+v %v", st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if hotelCalls.Load() != 2 {
		t.Fatalf("hotel handler called %d times, want 2", hotelCalls.Load())
	}
}

// Command golden writes demo/trip/testdata/golden/trip-v1.log: a golden log
// of trips as the demo recorded them before trip_requested's schema 2 (the
// budget was "budget", now "budget_cents"), with today's esjet and the
// older shape of the trip's definition below. Its states file is what that
// older definition folded; TestGoldenLogV1 loads the log through today's
// trip.Definition() and expects the same states.
//
//	go run ./demo/trip/testdata/golden
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/esjettest"
)

// tripRequestedV1 is trip_requested before schema 2.
type tripRequestedV1 struct {
	Traveler    string `json:"traveler"`
	Destination string `json:"destination"`
	Budget      int64  `json:"budget"`
	FlightPrice int64  `json:"flight_price"`
	HotelPrice  int64  `json:"hotel_price"`
}

// tripV1 is the trip's older shape: the commands whose events this log
// holds, recorded as that build recorded them.
func tripV1() *esjet.Definition {
	def := esjet.Define(trip.Type, trip.StateSchema, func(s trip.State, e esjet.Event) trip.State {
		switch e.Type {
		case trip.EventTripRequested:
			var d tripRequestedV1
			_ = e.Decode(&d)
			s.Status = trip.StatusRequested
			s.Traveler, s.Destination, s.Budget = d.Traveler, d.Destination, d.Budget
			s.Flight.Price, s.Hotel.Price = d.FlightPrice, d.HotelPrice
			s.Amount = d.FlightPrice + d.HotelPrice
		case trip.EventNoteAdded:
			s.Notes++
		}
		return s
	})
	esjet.On(def, trip.KindRequestTrip, func(s trip.State, c trip.RequestTrip) (esjet.Decision, error) {
		return esjet.Emit(trip.EventTripRequested, tripRequestedV1(c)), nil
	})
	esjet.On(def, trip.KindAddNote, func(s trip.State, c trip.AddNote) (esjet.Decision, error) {
		return esjet.Emit(trip.EventNoteAdded, trip.NoteAdded(c)), nil
	})
	return def.Definition()
}

func main() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "esjet-golden-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg := esjet.DefaultConfig()
	cfg.Namespace = "test"
	cfg.NATS.Embedded.DataDir = filepath.Join(dir, "data")
	cfg.NATS.Embedded.Listen = "127.0.0.1:0"
	cfg.HTTP.Listen = "none"
	n, err := esjet.Start(ctx, esjet.Options{Config: cfg, Aggregates: []*esjet.Definition{tripV1()}})
	if err != nil {
		log.Fatal(err)
	}
	defer n.Close(ctx)
	sends := []struct {
		id, kind string
		payload  any
	}{
		{"g1", trip.KindRequestTrip, trip.RequestTrip{Traveler: "ada", Destination: "Lisbon", Budget: 100_000, FlightPrice: 40_000, HotelPrice: 30_000}},
		{"g2", trip.KindRequestTrip, trip.RequestTrip{Traveler: "bob", Destination: "Oslo", Budget: 90_000, FlightPrice: 30_000, HotelPrice: 20_000}},
		{"g2", trip.KindAddNote, trip.AddNote{Text: "window seat"}},
		{"g2", trip.KindAddNote, trip.AddNote{Text: "late check-in"}},
		{"g3", trip.KindRequestTrip, trip.RequestTrip{Traveler: "cy", Destination: "Rome", Budget: 50_000, FlightPrice: 20_000, HotelPrice: 10_000}},
	}
	for _, s := range sends {
		if _, err := n.Send(ctx, trip.Type, s.id, s.kind, s.payload); err != nil {
			log.Fatal(err)
		}
	}
	out := filepath.Join("demo", "trip", "testdata", "golden", "trip-v1.log")
	if err := esjettest.WriteLog(ctx, n, out); err != nil {
		log.Fatal(err)
	}
	fmt.Println("wrote", out)
}

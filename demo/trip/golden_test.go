package trip_test

import (
	"encoding/json"
	"testing"

	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/esjettest"
)

// TestGoldenLogV1: a log the demo recorded before trip_requested's schema
// 2 (testdata/golden, written by `go run ./demo/trip/testdata/golden`)
// loads through today's definition into the states the older build folded,
// and its history shows the current shape.
func TestGoldenLogV1(t *testing.T) {
	n := esjettest.StartWithLog(t, "testdata/golden/trip-v1.log", trip.Definition())
	esjettest.CheckStates(t, n, "testdata/golden/trip-v1.log.states.json")

	h, err := n.Events(t.Context(), trip.Type, "g1")
	if err != nil {
		t.Fatal(err)
	}
	ev := h.Events[0]
	raw, _ := json.Marshal(ev.Data)
	var data map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	if ev.Type != trip.EventTripRequested || ev.Schema != 2 || data["budget_cents"] != 100000.0 || data["budget"] != nil {
		t.Fatalf("history shows %s schema %d %s; want trip_requested schema 2 with budget_cents and no budget", ev.Type, ev.Schema, raw)
	}

	// The log as projections read it: every trip_requested at schema 2.
	evs, _, err := n.ReadLog(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	requested := 0
	for _, e := range evs {
		if e.Type != trip.EventTripRequested {
			continue
		}
		requested++
		var r trip.TripRequested
		if err := json.Unmarshal(e.Data, &r); err != nil || e.Schema != 2 || r.Budget == 0 {
			t.Errorf("the log shows %s/%s %s schema %d %s; want schema 2 with budget_cents", e.AggregateType, e.AggregateID, e.Type, e.Schema, e.Data)
		}
	}
	if requested != 3 {
		t.Fatalf("the log shows %d trip_requested events, want the golden log's 3", requested)
	}
}

// TestGoldenLogV1ThroughTheNextShape: the same golden log, loaded through
// the trip's next shape (trip_requested at schema 3: two upcasters in a
// chain), folds into the same states, and its history shows schema 3 with
// the currency filled in.
func TestGoldenLogV1ThroughTheNextShape(t *testing.T) {
	n := esjettest.StartWithLog(t, "testdata/golden/trip-v1.log", trip.NextDefinition())
	esjettest.CheckStates(t, n, "testdata/golden/trip-v1.log.states.json")

	h, err := n.Events(t.Context(), trip.Type, "g1")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(h.Events[0].Data)
	var r trip.TripRequested
	if err := json.Unmarshal(raw, &r); err != nil || h.Events[0].Schema != 3 || r.Currency != trip.Currency || r.Budget != 100000 {
		t.Fatalf("history shows trip_requested schema %d %s; want schema 3 with budget_cents 100000 and currency %s", h.Events[0].Schema, raw, trip.Currency)
	}
}

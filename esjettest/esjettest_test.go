package esjettest_test

import (
	"errors"
	"net/http"
	"testing"

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

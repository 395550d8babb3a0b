package node_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/esjettest"
	"github.com/esjet/esjet/internal/natstest"
)

// TestCloseSaysWhatItWaitsFor closes a node while a worker is inside its
// handler: the log names the kind it waits for, the handler finishes, and a
// normal stop logs no context error.
func TestCloseSaysWhatItWaitsFor(t *testing.T) {
	var logs natstest.Buffer
	entered, release := make(chan struct{}), make(chan struct{})
	handlers := map[string]esjet.Handler{}
	for _, kind := range []string{trip.KindLockBudget, trip.KindBookFlight, trip.KindBookHotel} {
		handlers[kind] = esjet.HandlerFunc(func(ctx context.Context, d esjet.Delivery) (json.RawMessage, error) {
			if d.Kind == trip.KindLockBudget {
				close(entered)
				<-release
			}
			return json.RawMessage(`{"ref":"x"}`), nil
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	n, err := esjet.Start(ctx, esjet.Options{Config: esjettest.Config(t), Aggregates: []*esjet.Definition{trip.Definition()},
		Handlers: handlers, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Send(ctx, trip.Type, "slow", trip.KindRequestTrip, trip.RequestTrip{
		Traveler: "ada", Destination: "Lisbon", Budget: 1000, FlightPrice: 400, HotelPrice: 300}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the lock_budget handler was never called")
	}
	closed := make(chan error, 1)
	go func() { closed <- n.Close(ctx) }()
	natstest.Eventually(t, 10*time.Second, func() bool {
		return strings.Contains(logs.String(), "draining: waiting for the workers of "+trip.KindLockBudget+" to finish their in-flight commands")
	})
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	out := logs.String()
	if !strings.Contains(out, "msg=stopped component=node") {
		t.Errorf("no clean stop logged:\n%s", out)
	}
	for _, bad := range []string{"deadline exceeded", "context canceled"} {
		if strings.Contains(out, bad) {
			t.Errorf("a normal stop logged %q:\n%s", bad, out)
		}
	}
}

// TestCloseDoesNotWaitOutATargetThatNeverAnswers stops a node while a
// worker keeps calling a NATS target nobody serves ("no responders", called
// again within the kind's 30s timeout): nothing was carried out, so the
// stop leaves the command for redelivery instead of waiting out the
// timeout past the shutdown grace ("context deadline exceeded").
func TestCloseDoesNotWaitOutATargetThatNeverAnswers(t *testing.T) {
	var logs natstest.Buffer
	cfg := esjettest.Config(t)
	w := config.DefaultWorker()
	w.Target, w.Subject = config.TargetNATS, "nobody.serves.this"
	cfg.Workers = map[string]config.Worker{trip.KindLockBudget: w}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	n, err := esjet.Start(ctx, esjet.Options{Config: cfg, Aggregates: []*esjet.Definition{trip.Definition()},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Send(ctx, trip.Type, "unserved", trip.KindRequestTrip, trip.RequestTrip{
		Traveler: "ada", Destination: "Lisbon", Budget: 1000, FlightPrice: 400, HotelPrice: 300}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, func() bool { return strings.Contains(logs.String(), "target unavailable") })
	cctx, ccancel := context.WithTimeout(t.Context(), 10*time.Second) // shorter than the kind's 30s timeout
	defer ccancel()
	if err := n.Close(cctx); err != nil {
		t.Fatalf("close: %v\n%s", err, logs.String())
	}
	if out := logs.String(); strings.Contains(out, "deadline exceeded") {
		t.Errorf("a normal stop logged a context error:\n%s", out)
	}
}

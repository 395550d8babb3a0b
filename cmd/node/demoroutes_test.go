package main

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/demo/services"
	"github.com/esjet/esjet/internal/natstest"
)

// TestTripCompletesWithDemoServicesOutsideTheNode follows the README's
// recipe for misbehaving suppliers: the node runs with
// ESJET_DEMO_SERVICES=false (startTestNode) and `esjet demo-services` runs
// beside it. The trip's commands must still be routed to demo.svc.>, so a
// requested trip is confirmed; without the routes it waits for ever.
func TestTripCompletesWithDemoServicesOutsideTheNode(t *testing.T) {
	flags := startTestNode(t, "demoroutes")
	startDemoServices(t, flags)

	requestTripConfirmed(t, flagValue(flags, "--listen"), "demoroutes", "r1")
}

// runNodeUntil runs `esjet run` in-process with flags (demo services off)
// and returns a function that stops it and waits for a clean return.
func runNodeUntil(t *testing.T, flags []string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut natstest.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"run"}, flags...), []string{"ESJET_DEMO_SERVICES=false"}, &out, &errOut)
	}()
	waitFor(t, &out, &errOut, done, " ready: ")
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("node: %v\n%s", err, errOut.String())
				}
			case <-time.After(30 * time.Second):
				t.Error("node did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// requestTripConfirmed sends request_trip for id over NATS and waits until
// the trip is confirmed: the whole saga ran through the demo services.
func requestTripConfirmed(t *testing.T, natsAddr, ns, id string) {
	t.Helper()
	nc, err := nats.Connect("nats://" + natsAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req := `{"traveler":"ada","destination":"Lisbon","budget":100000,"flight_price":40000,"hotel_price":30000}`
	prefix := "esjet." + ns + ".trip." + id + "."
	if m, err := nc.Request(prefix+"request_trip", []byte(req), 10*time.Second); err != nil || m.Header.Get("Nats-Service-Error-Code") != "" {
		t.Fatalf("request_trip %s: %v %v", id, err, m)
	}
	var state string
	natstest.Eventually(t, 60*time.Second, func() bool {
		if m, err := nc.Request(prefix+"state", nil, 5*time.Second); err == nil {
			state = string(m.Data)
		}
		return strings.Contains(state, `"confirmed"`)
	})
}

// TestDemoServicesRideOutANodeRestart pins issue 11's "demo-services exits
// when the node restarts": it must reconnect and serve the next trip.
func TestDemoServicesRideOutANodeRestart(t *testing.T) {
	addr := natstest.Addr(t)
	flags := []string{"--data-dir", filepath.Join(t.TempDir(), "data"), "--listen", addr, "--http", "none", "--namespace", "svcrestart"}
	stop := runNodeUntil(t, flags)

	svcDone, svcErr := startDemoServices(t, flags)
	requestTripConfirmed(t, addr, "svcrestart", "before")

	stop()
	runNodeUntil(t, flags)
	select {
	case err := <-svcDone:
		t.Fatalf("demo-services returned when the node restarted: %v\n%s", err, svcErr.String())
	default:
	}
	requestTripConfirmed(t, addr, "svcrestart", "after")
	if !strings.Contains(svcErr.String(), "reconnected to NATS") {
		t.Errorf("no reconnect logged:\n%s", svcErr.String())
	}
}

// TestTripRoutesDefaultOnlyWhatTheConfigLeavesToThem: with the services in
// the node every trip kind the config leaves out goes to them; without,
// the routes are the default of a config that routes none of the trip's
// kinds, and a config that routes some owns the routing (a node of a
// fleet that serves the bookings only must not pull the budget's commands
// to call nobody).
func TestTripRoutesDefaultOnlyWhatTheConfigLeavesToThem(t *testing.T) {
	hotel := config.Worker{Target: config.TargetHTTP, URL: "http://hotels.internal/book"}
	for _, tc := range []struct {
		name     string
		services bool
		next     bool
		workers  map[string]config.Worker
		want     int
	}{
		{"services in the node, nothing configured", true, false, nil, 6},
		{"services in the node, book_hotel elsewhere", true, false, map[string]config.Worker{"book_hotel": hotel}, 6},
		{"services beside the node, nothing configured", false, false, nil, 6},
		{"services beside the node, book_hotel configured", false, false, map[string]config.Worker{"book_hotel": hotel}, 1},
		{"services beside the node, another kind configured", false, false, map[string]config.Worker{"ship": hotel}, 7},
		// The next shape's new kind: routed only for a node of that build.
		{"next build, services in the node", true, true, nil, 7},
		{"next build, services beside the node", false, true, nil, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Demo.Services = tc.services
			cfg.Workers = tc.workers
			if tc.next {
				cfg.Demo.Build = config.DemoBuildNext
			}
			got := tripRoutes(cfg)
			if _, ok := got["send_itinerary"]; ok != tc.next {
				t.Fatalf("send_itinerary routed: %v, want %v (only a node of the next build serves it)", ok, tc.next)
			}
			if len(got) != tc.want {
				t.Fatalf("tripRoutes = %v, want %d kinds", got, tc.want)
			}
			if w, ok := got["book_hotel"]; !ok || (tc.workers["book_hotel"] != config.Worker{} && w != hotel) {
				t.Fatalf("book_hotel routed to %+v", w)
			}
			if w := got["lock_budget"]; tc.want >= 6 && w.Subject != services.SubjectBudgetLock {
				t.Fatalf("lock_budget routed to %+v, want %s", w, services.SubjectBudgetLock)
			}
		})
	}
}

// startDemoServices runs `esjet demo-services` with flags beside a node,
// waits until it is ready, and stops it (checking that it stops) when the
// test ends. It returns the channel its run returns on and its log.
func startDemoServices(t *testing.T, flags []string) (<-chan error, *natstest.Buffer) {
	t.Helper()
	svcCtx, stopSvc := context.WithCancel(t.Context())
	var svcOut, svcErr natstest.Buffer
	svcDone := make(chan error, 1)
	go func() { svcDone <- run(svcCtx, append([]string{"demo-services"}, flags...), nil, &svcOut, &svcErr) }()
	t.Cleanup(func() {
		stopSvc()
		select {
		case <-svcDone:
		case <-time.After(30 * time.Second):
			t.Error("demo-services did not stop")
		}
	})
	waitFor(t, &svcOut, &svcErr, svcDone, "demo services ready")
	return svcDone, &svcErr
}

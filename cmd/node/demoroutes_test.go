package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/internal/natstest"
)

// TestTripCompletesWithDemoServicesOutsideTheNode follows the README's
// recipe for misbehaving suppliers: the node runs with
// ESJET_DEMO_SERVICES=false (startTestNode) and `esjet demo-services` runs
// beside it. The trip's commands must still be routed to demo.svc.>, so a
// requested trip is confirmed; without the routes it waits for ever.
func TestTripCompletesWithDemoServicesOutsideTheNode(t *testing.T) {
	flags := startTestNode(t, "demoroutes")
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

	nc, err := nats.Connect("nats://" + flagValue(flags, "--listen"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req := `{"traveler":"ada","destination":"Lisbon","budget":100000,"flight_price":40000,"hotel_price":30000}`
	if m, err := nc.Request("esjet.demoroutes.trip.r1.request_trip", []byte(req), 10*time.Second); err != nil || m.Header.Get("Nats-Service-Error-Code") != "" {
		t.Fatalf("request_trip: %v %v", err, m)
	}
	var state string
	natstest.Eventually(t, 60*time.Second, func() bool {
		m, err := nc.Request("esjet.demoroutes.trip.r1.state", nil, 5*time.Second)
		if err == nil {
			state = string(m.Data)
		}
		return strings.Contains(state, `"confirmed"`)
	})
	if !strings.Contains(state, `"FL-`) || !strings.Contains(state, `"HT-`) {
		t.Fatalf("confirmed without booking refs: %s", state)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/demo/services"
	"github.com/esjet/esjet/internal/natstest"
)

// TestDemoServicesServeUntilContextEnds runs a node and `esjet demo-services
// --fail flights=terminal` in-process, as a user would in two terminals: a
// booking request gets a booking, a flight the terminal refusal, the control
// subject answers, and the command returns cleanly when its context ends
// (what SIGINT/SIGTERM do).
func TestDemoServicesServeUntilContextEnds(t *testing.T) {
	// The node's own in-process demo services are off (startTestNode):
	// this test talks to the standalone ones only.
	flags := startTestNode(t, "demosvc")
	addr := flagValue(flags, "--listen")

	svcCtx, stopSvc := context.WithCancel(t.Context())
	defer stopSvc()
	var svcOut, svcErr natstest.Buffer
	svcDone := make(chan error, 1)
	go func() {
		svcDone <- run(svcCtx, append([]string{"demo-services", "--fail", "flights=terminal", "--slow", "budget=10ms:1"}, flags...), nil, &svcOut, &svcErr)
	}()
	waitFor(t, &svcOut, &svcErr, svcDone, "demo services ready on demo.svc.>")

	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	request := func(subject, key, body string) services.Reply {
		t.Helper()
		m := nats.NewMsg(subject)
		m.Header.Set(services.HeaderIdempotencyKey, key)
		m.Data = []byte(body)
		reply, err := nc.RequestMsg(m, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: %v\n%s", subject, err, svcErr.String())
		}
		var rep services.Reply
		if err := json.Unmarshal(reply.Data, &rep); err != nil {
			t.Fatalf("%s: %s: %v", subject, reply.Data, err)
		}
		return rep
	}
	if rep := request(services.SubjectHotelsBook, "trip:t1:2:1", `{"traveler":"ada","destination":"Lisbon","price":30000}`); rep.Error != "" || !strings.Contains(string(rep.Result), `"booking_ref":"HT-`) {
		t.Fatalf("hotel: %+v", rep)
	}
	if rep := request(services.SubjectFlightsBook, "trip:t1:2:0", `{"traveler":"ada","destination":"Lisbon","price":40000}`); rep.Error != "no seats" || rep.Retryable {
		t.Fatalf("flight with --fail flights=terminal: %+v", rep)
	}
	ctl, err := nc.Request(services.SubjectControl, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var modes services.ControlReply
	if err := json.Unmarshal(ctl.Data, &modes); err != nil || modes.Modes[services.Flights].Kind != services.Terminal || modes.Modes[services.Budget].Kind != services.Slow {
		t.Fatalf("control: %s %v", ctl.Data, err)
	}

	stopSvc()
	select {
	case err := <-svcDone:
		if err != nil {
			t.Fatalf("demo-services after cancel: %v\n%s", err, svcErr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("demo-services did not return after cancel")
	}
}

func TestDemoServicesRejectsBadFlagsBeforeConnecting(t *testing.T) {
	var stdout, stderr bytes.Buffer
	// No node listens on port 1: a flag error must come first.
	err := run(t.Context(), []string{"demo-services", "--listen", "127.0.0.1:1", "--fail", "trains=terminal", "--slow", "budget=soon", "--fail", "hotels=terminal", "--slow", "hotels=1s"}, nil, &stdout, &stderr)
	if err == nil {
		t.Fatal("bad flags accepted")
	}
	for _, want := range []string{"trains", "soon", "hotels given twice"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

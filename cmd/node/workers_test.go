package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/wire"
)

// TestWorkersPauseResumeAgainstARunningNode pauses a kind no worker serves
// (so its backlog stays put), reads its status, and resumes it, as an
// operator would; bad input is refused and changes nothing.
func TestWorkersPauseResumeAgainstARunningNode(t *testing.T) {
	ns := "wkcli"
	flags := startTestNode(t, ns)
	out, _, err := dlqCLI(t, flags, "", "workers", "ls")
	if err != nil || !strings.Contains(strings.Join(strings.Fields(out), " "), "book_flight running 0 0 -") {
		t.Fatalf("workers ls on a new namespace: %v\n%s", err, out)
	}
	out, _, err = dlqCLI(t, flags, "", "workers", "pause", "book_flight", "--reason", "supplier outage")
	if err != nil || !strings.Contains(out, "paused book_flight by ") || !strings.Contains(out, "pull nothing until a resume") {
		t.Fatalf("workers pause: %v\n%s", err, out)
	}
	if _, _, err := dlqCLI(t, flags, "", "workers", "pause", "book_flight"); err == nil || !strings.Contains(err.Error(), "paused already") {
		t.Fatalf("a second pause: %v, want refused as paused already", err)
	}
	for _, bad := range [][]string{{"pause", "a.b"}, {"pause", ">"}} {
		if _, _, err := dlqCLI(t, flags, "", append([]string{"workers"}, bad...)...); err == nil || !strings.Contains(err.Error(), "400") {
			t.Fatalf("workers %v: %v, want a 400", bad, err)
		}
	}

	nc, err := nats.Connect("nats://" + flagValue(flags, "--listen"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for _, id := range []string{"trip:p1:1:0", "trip:p2:1:0"} {
		m := nats.NewMsg(wire.CommandSubject(ns, "book_flight"))
		m.Data = []byte(`{}`)
		m.Header.Set(jetstream.MsgIDHeader, id)
		m.Header.Set(wire.HeaderCommandID, id)
		m.Header.Set(wire.HeaderCommandKind, "book_flight")
		if _, err := js.PublishMsg(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	// The two commands wait (a pull in flight when the pause landed may
	// have taken one: then it is in flight).
	var st consumer.KindStatus
	natstest.Eventually(t, 10*time.Second, func() bool {
		out, _, err := dlqCLI(t, flags, "", "workers", "ls", "--json")
		var sts []consumer.KindStatus
		if err != nil || json.Unmarshal([]byte(out), &sts) != nil {
			t.Fatalf("workers ls --json: %v\n%s", err, out)
		}
		for _, s := range sts {
			if s.Kind == "book_flight" {
				st = s
			}
		}
		return st.Backlog+uint64(st.InFlight) == 2
	})
	if !st.Paused || st.Reason != "supplier outage" || st.Oldest.IsZero() || st.By == "" {
		t.Fatalf("book_flight while paused: %+v", st)
	}
	out, _, err = dlqCLI(t, flags, "", "workers", "resume", "book_flight")
	if err != nil || !strings.Contains(out, "resumed book_flight") || !strings.Contains(out, "pull again") {
		t.Fatalf("workers resume: %v\n%s", err, out)
	}
	if _, _, err := dlqCLI(t, flags, "", "workers", "resume", "book_flight"); err == nil || !strings.Contains(err.Error(), "not paused") {
		t.Fatalf("a second resume: %v, want refused as not paused", err)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/wire"
)

// TestStrayMessageOnATripIsShownAndDoesNotBrickIt: `nats pub
// <ns>.evt.trip.p1 hello` on a requested trip. The trip still takes
// commands, `esjet events` shows the stray message as a skipped row, and
// `esjet reconcile` counts it. Before, every request on p1 answered 500.
func TestStrayMessageOnATripIsShownAndDoesNotBrickIt(t *testing.T) {
	ns := "straytest"
	flags := startTestNode(t, ns)
	var stderr bytes.Buffer
	cli := func(args ...string) (string, error) {
		var stdout bytes.Buffer
		stderr.Reset()
		err := run(t.Context(), append(args, flags...), nil, &stdout, &stderr)
		return stdout.String(), err
	}
	if out, err := cli("send", "trip", "p1", "request_trip",
		`{"traveler":"ada","destination":"Lisbon","budget":100000,"flight_price":40000,"hotel_price":30000}`); err != nil {
		t.Fatalf("send: %v\n%s%s", err, out, stderr.String())
	}
	nc, err := nats.Connect("nats://" + flagValue(flags, "--listen"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(ns+".evt.trip.p1", []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}

	if out, err := cli("send", "trip", "p1", "add_note", `{"text":"still here"}`); err != nil {
		t.Fatalf("a command on the trip after a stray message: %v\n%s%s", err, out, stderr.String())
	}
	out, err := cli("events", "trip", "p1")
	if err != nil {
		t.Fatalf("events: %v\n%s", err, out)
	}
	row := "(skipped: not an esjet decision, 5 bytes)"
	if !strings.Contains(out, row) || !strings.Contains(out, "trip_requested") || !strings.Contains(out, "note_added") {
		t.Errorf("events does not show the stray message as a skipped row between the trip's events:\n%s", out)
	} else if strings.Index(out, "trip_requested") > strings.Index(out, row) || strings.Index(out, row) > strings.Index(out, "note_added") {
		t.Errorf("the skipped row is not in log order:\n%s", out)
	}
	out, err = cli("events", "trip", "p1", "--json")
	var h api.History
	if err != nil || json.Unmarshal([]byte(out), &h) != nil || len(h.Skipped) != 1 || h.Skipped[0].Seq != ack.Sequence {
		t.Errorf("events --json: %v; want one skipped message at seq %d:\n%s", err, ack.Sequence, out)
	}

	// Read in pages of one event, the stray message is on exactly one page.
	seen := 0
	for after := uint64(0); ; {
		msg := nats.NewMsg(wire.APIPrefix(ns) + ".trip.p1.events")
		msg.Header.Set(api.HeaderAfterVersion, strconv.FormatUint(after, 10))
		msg.Header.Set(api.HeaderLimit, "1")
		reply, err := nc.RequestMsg(msg, 10*time.Second)
		var page api.History
		if err != nil || json.Unmarshal(reply.Data, &page) != nil {
			t.Fatalf("history page after %d: %v", after, err)
		}
		seen += len(page.Skipped)
		if page.NextAfter == 0 {
			break
		}
		after = page.NextAfter
	}
	if seen != 1 {
		t.Errorf("the stray message is on %d history pages, want 1", seen)
	}

	out, _ = cli("reconcile", "--json", "--no-progress")
	var rep ops.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Undecodable != 1 {
		t.Errorf("reconcile counts %d undecodable message(s), want 1 (seq %s):\n%s", rep.Undecodable, strconv.FormatUint(ack.Sequence, 10), out)
	}
}

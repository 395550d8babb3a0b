package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// TestReconcileAndOutboxCommandsAgainstARunningNode runs a node in-process
// on a fixed loopback port (the CLI refuses port 0), issues a command
// through the API, and runs `outbox` and `reconcile` as a user would: clean
// node → exit 0 with JSON totals; a deleted OUTBOX message → exit 1 naming
// the orphan.
func TestReconcileAndOutboxCommandsAgainstARunningNode(t *testing.T) {
	ns := "clitest" // the node has a data dir of its own
	flags := startTestNode(t, ns)

	cli := func(args ...string) (string, string, error) {
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), append(args, flags...), nil, &stdout, &stderr)
		return stdout.String(), stderr.String(), err
	}
	if out, stderr, err := cli("send", "trip", "t1", "request_trip",
		`{"traveler":"ada","destination":"Lisbon","budget":100000,"flight_price":40000,"hotel_price":30000}`); err != nil {
		t.Fatalf("send: %v\n%s%s", err, out, stderr)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		out, _, err := cli("outbox", "--json")
		var rep outboxReport
		return err == nil && json.Unmarshal([]byte(out), &rep) == nil && rep.Lag.RelayConsumer && rep.Lag.Unrelayed == 0 && len(rep.Kinds) > 0
	})

	out, stderr, err := cli("reconcile", "--json", "--no-progress")
	if err != nil {
		t.Fatalf("reconcile on a clean node: %v\n%s%s", err, out, stderr)
	}
	if stderr != "" {
		t.Errorf("stderr with --json --no-progress: %q", stderr)
	}
	var rep ops.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("reconcile --json is not a report: %v\n%s", err, out)
	}
	var raw map[string]any
	_ = json.Unmarshal([]byte(out), &raw)
	if rep.Totals.Issued != 1 || rep.Totals.InOutbox != 1 || rep.Drift() != 0 || raw["drift"] != 0.0 || rep.Kinds["lock_budget"].Issued != 1 {
		t.Fatalf("clean node report:\n%s", out)
	}

	out, _, err = cli("reconcile")
	if err != nil || !strings.Contains(out, "no drift") || !strings.Contains(out, "lock_budget") {
		t.Fatalf("text reconcile: %v\n%s", err, out)
	}
	out, _, err = cli("outbox")
	if err != nil || !strings.Contains(out, "relay: up to date") || !strings.Contains(out, "lock_budget") {
		t.Fatalf("outbox: %v\n%s", err, out)
	}
	id := wire.CommandID("trip", "t1", 1, 0)
	out, _, err = cli("outbox", id, "--json")
	var info ops.CommandInfo
	if err != nil || json.Unmarshal([]byte(out), &info) != nil || info.Cause == nil || len(info.Outbox) != 1 || info.Kind != "lock_budget" {
		t.Fatalf("outbox %s: %v\n%s", id, err, out)
	}
	if _, _, err := cli("outbox", "trip:nope"); err == nil || !strings.Contains(err.Error(), "<type>:<id>:<version>:<index>") {
		t.Fatalf("bad id: %v", err)
	}

	// Plant an orphan: delete the command from OUTBOX.
	nc, err := nats.Connect("nats://" + flagValue(flags, "--listen"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(t.Context(), streams.NamesFor(ns).Outbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(t.Context(), info.Outbox[0].Seq); err != nil {
		t.Fatal(err)
	}
	out, _, err = cli("reconcile", "--no-progress")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("reconcile with an orphan: err = %v, want exit 1\n%s", err, out)
	}
	if !strings.Contains(out, "1 orphan(s)") || !strings.Contains(out, id) {
		t.Fatalf("orphan not listed:\n%s", out)
	}
	// OUTBOX's duplicate window (10m) still holds the id: the repair says so
	// and the state after it still has the orphan.
	out, _, err = cli("reconcile", "--repair", "--json")
	var rr repairReport
	if !errors.As(err, &ee) || json.Unmarshal([]byte(out), &rr) != nil || rr.Repaired != 0 || rr.After.Totals.Orphans != 1 ||
		!strings.Contains(rr.RepairError, "duplicate window") {
		t.Fatalf("repair inside the window: %v\n%s", err, out)
	}
	if _, _, err := cli("reconcile", "--stuck-after", "0s"); err == nil || !strings.Contains(err.Error(), "--stuck-after") {
		t.Fatalf("--stuck-after 0: %v", err)
	}
}

// printList caps long lists.
func TestReconcileTextCapsLists(t *testing.T) {
	rep := ops.Report{Namespace: "x", RelayConsumer: true, StuckAfter: time.Minute, Kinds: map[string]ops.Counts{}}
	for i := range 25 {
		rep.Orphans = append(rep.Orphans, ops.Orphan{ID: fmt.Sprintf("trip:t%d:1:0", i), Kind: "k", DecisionSeq: uint64(i + 1)})
	}
	rep.Totals.Orphans = 25
	var buf bytes.Buffer
	printReconcile(&buf, rep)
	out := buf.String()
	if !strings.Contains(out, "trip:t19:1:0") || strings.Contains(out, "trip:t20:1:0") || !strings.Contains(out, "… and 5 more") {
		t.Fatalf("list not capped at 20:\n%s", out)
	}
}

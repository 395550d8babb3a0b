package main

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// dlqTestNode runs a node in-process until the test ends (see startTestNode).
func dlqTestNode(t *testing.T, ns string) []string { return startTestNode(t, ns) }

// dlqCLI runs one esjet command in-process with stdin.
func dlqCLI(t *testing.T, flags []string, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	root := newRootCmd(nil, &stdout, &stderr)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(append(args, flags...))
	err := root.ExecuteContext(t.Context())
	return stdout.String(), stderr.String(), err
}

// TestDLQCommandsAgainstARunningNode plants dead letters of a kind no
// worker serves (the node's workers must not touch them), then drives
// ls, show, retry, discard and a bulk retry as an operator would.
func TestDLQCommandsAgainstARunningNode(t *testing.T) {
	ns := "dlqcli"
	flags := dlqTestNode(t, ns)
	nc, err := nats.Connect("nats://" + flags[3])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := t.Context()
	names := streams.NamesFor(ns)

	// kill stores a command in OUTBOX as the relay would and dead-letters
	// it as a worker would.
	kill := func(id, kind, reason string, at time.Time) uint64 {
		t.Helper()
		m := nats.NewMsg(wire.CommandSubject(ns, kind))
		m.Data = []byte(`{"parcel":"` + id + `"}`)
		m.Header.Set(jetstream.MsgIDHeader, id)
		m.Header.Set(wire.HeaderCommandID, id)
		m.Header.Set(wire.HeaderCommandKind, kind)
		m.Header.Set(wire.HeaderAggregateType, "parcel")
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		dack, err := js.PublishMsg(ctx, wire.DeadLetterMsg(ns, m, ack.Sequence, reason, 3, "node-1", at))
		if err != nil {
			t.Fatal(err)
		}
		return dack.Sequence
	}
	now := time.Now()
	kill("parcel:p1:1:0", "ship_parcel", "HTTP 503 from carrier", now.Add(-2*time.Hour))
	seq2 := kill("parcel:p2:1:0", "ship_parcel", "HTTP 409: address rejected", now.Add(-time.Minute))
	kill("parcel:p3:1:0", "label_parcel", "printer on fire", now)

	out, _, err := dlqCLI(t, flags, "", "dlq", "ls")
	if err != nil || !strings.Contains(out, "SEQ") || !strings.Contains(out, "COMMAND ID") ||
		!strings.Contains(out, "parcel:p1:1:0") || !strings.Contains(out, "printer on fire") || !strings.Contains(out, "3 dead letter(s)") {
		t.Fatalf("dlq ls: %v\n%s", err, out)
	}
	var list []ops.DeadLetter
	out, _, err = dlqCLI(t, flags, "", "dlq", "ls", "--kind", "ship_parcel", "--older-than", "1h", "--json")
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].ID != "parcel:p1:1:0" {
		t.Fatalf("dlq ls --kind --older-than --json: %v\n%s", err, out)
	}
	out, _, err = dlqCLI(t, flags, "", "dlq", "ls", "--error", "address", "--newer-than", "10m", "--json")
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].Seq != seq2 {
		t.Fatalf("dlq ls --error --newer-than --json: %v\n%s", err, out)
	}
	out, _, err = dlqCLI(t, flags, "", "dlq", "ls", "--kind", "nothing_here")
	if err != nil || !strings.Contains(out, "no dead letters") {
		t.Fatalf("dlq ls of an empty kind: %v\n%s", err, out)
	}

	out, _, err = dlqCLI(t, flags, "", "dlq", "show", "parcel:p2:1:0")
	if err != nil || !strings.Contains(out, "HTTP 409: address rejected") || !strings.Contains(out, `"parcel": "parcel:p2:1:0"`) ||
		!strings.Contains(out, "history: none") {
		t.Fatalf("dlq show: %v\n%s", err, out)
	}

	// Retry one by seq: back in OUTBOX with a new msg id.
	out, _, err = dlqCLI(t, flags, "", "dlq", "retry", strconv.FormatUint(seq2, 10))
	wantID := "parcel:p2:1:0:redrive:" + strconv.FormatUint(seq2, 10)
	if err != nil || !strings.Contains(out, "retried seq "+strconv.FormatUint(seq2, 10)) || !strings.Contains(out, wantID) {
		t.Fatalf("dlq retry: %v\n%s", err, out)
	}
	ost, _ := js.Stream(ctx, names.Outbox)
	// At low priority: a bulk re-drive does not delay live commands.
	if !strings.Contains(out, wire.BandSubject(ns, "ship_parcel", wire.PriorityLow)) {
		t.Fatalf("dlq retry does not say it re-drove to the low band:\n%s", out)
	}
	last, err := ost.GetLastMsgForSubject(ctx, wire.BandSubject(ns, "ship_parcel", wire.PriorityLow))
	if err != nil || last.Header.Get(jetstream.MsgIDHeader) != wantID || last.Header.Get(wire.HeaderCommandID) != "parcel:p2:1:0" {
		t.Fatalf("OUTBOX after retry: %v %v", last, err)
	}
	var det ops.DeadLetterDetail
	// A retried letter is settled; show still tells its story.
	out, _, err = dlqCLI(t, flags, "", "dlq", "show", "parcel:p2:1:0")
	if err != nil || !strings.Contains(out, "is settled, no longer a dead letter: retried by") || !strings.Contains(out, "history:") ||
		!strings.Contains(out, "re-driven as") {
		t.Fatalf("show after retry: %v\n%s", err, out)
	}

	// Discard needs a reason.
	if _, _, err := dlqCLI(t, flags, "", "dlq", "discard", "parcel:p3:1:0"); err == nil || !strings.Contains(err.Error(), "--reason") {
		t.Fatalf("discard without a reason: %v", err)
	}
	out, _, err = dlqCLI(t, flags, "", "dlq", "discard", "parcel:p3:1:0", "--reason", "printer replaced; relabelled by hand")
	if err != nil || !strings.Contains(out, "discarded seq") || !strings.Contains(out, "relabelled by hand") {
		t.Fatalf("dlq discard: %v\n%s", err, out)
	}
	// dlq show of a discarded letter shows its history, by id and by seq.
	for _, arg := range []string{"parcel:p3:1:0", strconv.FormatUint(seqOf(t, out), 10)} {
		shown, _, err := dlqCLI(t, flags, "", "dlq", "show", arg)
		if err != nil || !strings.Contains(shown, "parcel:p3:1:0 (label_parcel) is settled, no longer a dead letter: discarded by") ||
			!strings.Contains(shown, "reason    printer replaced; relabelled by hand") || !strings.Contains(shown, "history:") ||
			!regexp.MustCompile(`(?m)^  \S+\s+discarded\s+`).MatchString(shown) {
			t.Fatalf("dlq show %s of a discarded letter: %v\n%s", arg, err, shown)
		}
	}

	// Bulk retry asks first.
	kill("parcel:p4:1:0", "ship_parcel", "HTTP 503 from carrier", now)
	_, stderr, err := dlqCLI(t, flags, "n\n", "dlq", "retry", "--kind", "ship_parcel")
	if err == nil || !strings.Contains(err.Error(), "nothing retried") || !strings.Contains(stderr, "Retry 2 dead letters of kind ship_parcel? [y/N]") {
		t.Fatalf("bulk retry answered n: %v\n%s", err, stderr)
	}
	if _, _, err := dlqCLI(t, flags, "", "dlq", "retry", "--kind", "ship_parcel"); err == nil || !strings.Contains(err.Error(), "--yes") {
		t.Fatalf("bulk retry without an answer: %v", err)
	}
	out, _, err = dlqCLI(t, flags, "", "dlq", "ls", "--kind", "ship_parcel", "--json")
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 2 {
		t.Fatalf("dead letters after a refused bulk retry: %v\n%s", err, out)
	}
	out, _, err = dlqCLI(t, flags, "y\n", "dlq", "retry", "--kind", "ship_parcel")
	if err != nil || !strings.Contains(out, "retried 2 of 2 dead letters of kind ship_parcel") || strings.Count(out, "retried seq") != 2 {
		t.Fatalf("bulk retry answered y: %v\n%s", err, out)
	}
	out, _, err = dlqCLI(t, flags, "", "dlq", "ls", "--json")
	if err != nil || strings.TrimSpace(out) != "[]" {
		t.Fatalf("DLQ after everything: %v\n%s", err, out)
	}
	if _, _, err := dlqCLI(t, flags, "", "dlq", "retry"); err == nil || !strings.Contains(err.Error(), "--kind") {
		t.Fatalf("retry of nothing: %v", err)
	}

	// The re-driven copy fails again: a new entry, shown with the history
	// of the earlier one.
	dack, err := js.PublishMsg(ctx, wire.DeadLetterMsg(ns, &nats.Msg{Subject: last.Subject, Header: last.Header, Data: last.Data},
		last.Sequence, "still 409", 1, "node-2", time.Now()))
	if err != nil || dack.Duplicate {
		t.Fatalf("dead letter of the re-drive: %+v, %v", dack, err)
	}
	seq5 := dack.Sequence
	out, _, err = dlqCLI(t, flags, "", "dlq", "show", "parcel:p2:1:0", "--json")
	if err != nil || json.Unmarshal([]byte(out), &det) != nil || det.Seq != seq5 || len(det.History) != 1 || det.History[0].DLQSeq != seq2 {
		t.Fatalf("dlq show --json: %v\n%s", err, out)
	}

	// Reconcile knows what the DLQ did: no drift, one discarded, the
	// re-driven commands in flight, none dead but the new entry.
	var rep ops.Report
	out, _, err = dlqCLI(t, flags, "", "reconcile", "--json", "--no-progress")
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("reconcile: %v\n%s", err, out)
	}
	ship, label := rep.Kinds["ship_parcel"], rep.Kinds["label_parcel"]
	if rep.Drift() != 0 || label.Discarded != 1 || label.InFlight != 0 || ship.InFlight != 2 || ship.Dead != 1 || ship.Duplicates != 0 {
		t.Fatalf("reconcile after the DLQ actions:\n%s", out)
	}
	if out, _, err := dlqCLI(t, flags, "", "reconcile", "--no-progress"); err != nil || !strings.Contains(out, "DISCARDED") {
		t.Fatalf("reconcile text: %v\n%s", err, out)
	}
}

func TestConfirmRefusesAStdinThatIsNotATerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stdin")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, _ = f.WriteString("y\n")
	_, _ = f.Seek(0, 0)
	var w bytes.Buffer
	ok, err := confirm(f, &w, "Retry? [y/N] ")
	if ok || err == nil || !strings.Contains(err.Error(), "--yes") || w.Len() != 0 {
		t.Fatalf("confirm from a file: %v, %v, prompt %q", ok, err, w.String())
	}
	for in, want := range map[string]bool{"y\n": true, "YES\n": true, "n\n": false, "\n": false, "sure\n": false} {
		if ok, err := confirm(strings.NewReader(in), &w, "? "); ok != want || err != nil {
			t.Errorf("answer %q: %v, %v", in, ok, err)
		}
	}
}

// seqOf reads the DLQ sequence from `dlq discard`'s "discarded seq N" line.
func seqOf(t *testing.T, out string) uint64 {
	t.Helper()
	m := regexp.MustCompile(`discarded seq (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no \"discarded seq\" in %q", out)
	}
	n, _ := strconv.ParseUint(m[1], 10, 64)
	return n
}

// TestDLQRetryRefusesWhenTheAggregateWasToldFailed: `esjet dlq retry` of a
// command whose aggregate already recorded <kind>_failed says so and
// re-drives nothing; --after-failed re-drives it.
func TestDLQRetryRefusesWhenTheAggregateWasToldFailed(t *testing.T) {
	ns := "dlqtold"
	flags := dlqTestNode(t, ns)
	nc, err := nats.Connect("nats://" + flags[3])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := t.Context()
	id := "parcel:p9:1:0"
	m := nats.NewMsg(wire.CommandSubject(ns, "ship_parcel"))
	m.Data = []byte(`{}`)
	m.Header.Set(jetstream.MsgIDHeader, id)
	m.Header.Set(wire.HeaderCommandID, id)
	m.Header.Set(wire.HeaderCommandKind, "ship_parcel")
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, wire.DeadLetterMsg(ns, m, ack.Sequence, "carrier said no", 3, "node-1", time.Now())); err != nil {
		t.Fatal(err)
	}
	log, err := streams.Open(ctx, js, ns, streams.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := log.Append(ctx, streams.Decision{ID: wire.OutcomeDecisionID(wire.OutcomeSpace(ns), "parcel", "p9", id, wire.OutcomeFailed), AggregateType: "parcel", AggregateID: "p9",
		Events: []streams.Event{{Type: "shipping_failed"}}, IdempotencyKey: wire.FailedKey(id), CausationID: id}, streams.Position{}); err != nil {
		t.Fatal(err)
	}

	_, _, err = dlqCLI(t, flags, "", "dlq", "retry", id)
	if err == nil || !strings.Contains(err.Error(), "parcel/p9 was already told ship_parcel_failed") || !strings.Contains(err.Error(), "--after-failed") {
		t.Fatalf("dlq retry after the aggregate was told it failed: %v", err)
	}
	out, _, err := dlqCLI(t, flags, "", "dlq", "ls")
	if err != nil || !strings.Contains(out, id) {
		t.Fatalf("the refused dead letter left the DLQ: %v\n%s", err, out)
	}
	out, _, err = dlqCLI(t, flags, "", "dlq", "retry", id, "--after-failed")
	if err != nil || !strings.Contains(out, "retried") {
		t.Fatalf("dlq retry --after-failed: %v\n%s", err, out)
	}
}

package e2e

// Issue 28 item 6: today's DLQ keeps one message per subject, one subject
// per letter, so settled letters can expire. An older esjet's DLQ kept a
// kind's letters together on <ns>.dlq.<kind> (and its audit records on
// <ns>.dlq.audit.<kind>): updating it to one message per subject would
// keep only the newest of each. esjet provision moves the older letters
// first; killed in the middle (while copying, and between the update and
// emptying the older subjects) and run again, it finishes with every
// letter where today's readers find it, once, and each still retry-able
// or discard-able through the node.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/failpoint"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// oldLetter is a dead letter the test writes as an older esjet did.
type oldLetter struct {
	kind, id  string // command kind and id
	outboxSeq uint64
	seq       uint64 // its DLQ sequence
	settled   string // "": open; else the action of its older audit record
}

// makeOldDLQ creates ns's DLQ as an older esjet did (every message of a
// subject kept, no per-message TTLs) and writes letters into it, several
// per kind, with older audit records for the settled ones.
func makeOldDLQ(t *testing.T, js jetstream.JetStream, ns string, letters []*oldLetter) {
	t.Helper()
	names := streams.NamesFor(ns)
	var cfg jetstream.StreamConfig
	for _, c := range streams.StreamConfigs(names, streams.ProvisionConfig{}) {
		if c.Name == names.DLQ {
			cfg = c
		}
	}
	cfg.MaxMsgsPerSubject, cfg.AllowMsgTTL = -1, false
	if _, err := js.CreateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, l := range letters {
		parts := strings.Split(l.id, ":")
		rec := wire.Record{Seq: uint64(10 + i), Decision: wire.Decision{ID: fmt.Sprintf("d-%d", i), AggregateType: parts[0], AggregateID: parts[1],
			Events: []wire.Event{{Type: "trip_requested", Version: 2}}}}
		delivered := wire.EncodeCommand(ns, rec, wire.Command{ID: l.id, Kind: l.kind, Payload: json.RawMessage(`{"n":` + fmt.Sprint(i) + `}`)}, now)
		m := wire.DeadLetterMsg(ns, delivered, l.outboxSeq, "no seats", 3, "old-node", now)
		m.Subject = wire.LegacyDeadLetterSubject(ns, l.kind)
		ack, err := js.PublishMsg(t.Context(), m)
		if err != nil {
			t.Fatal(err)
		}
		l.seq = ack.Sequence
	}
	// Newest first: the newest letter of a kind may be settled while its
	// audit record is not the kind's newest (the update keeps only that).
	for _, l := range slices.Backward(letters) {
		if l.settled == "" {
			continue
		}
		data, _ := json.Marshal(ops.AuditRecord{Action: l.settled, CommandID: l.id, Kind: l.kind, DLQSeq: l.seq, Reason: "handled by phone",
			By: "old-operator", At: now, Error: "no seats", Attempts: 3})
		m := &nats.Msg{Subject: wire.LegacyAuditSubject(ns, l.kind), Data: data, Header: nats.Header{ops.HeaderDLQAction: {l.settled}}}
		if _, err := js.PublishMsg(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
}

// dlqSubjects counts the DLQ's messages per subject under filter.
func dlqSubjects(t *testing.T, js jetstream.JetStream, ns, filter string) map[string]uint64 {
	t.Helper()
	st, err := js.Stream(t.Context(), streams.NamesFor(ns).DLQ)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects
}

func TestProvisionMovesAnOlderDLQThroughKills(t *testing.T) {
	t.Parallel()
	srv := natstest.RunServer(t, natstest.SyncAlways())
	url := srv.ClientURL()
	_, js := natstest.Connect(t, srv)
	const ns = "demo" // the node's default namespace
	letters := []*oldLetter{
		{kind: "book_flight", id: "trip:u1:2:0", outboxSeq: 101},
		{kind: "book_flight", id: "trip:u2:2:0", outboxSeq: 102, settled: ops.AuditDiscarded},
		{kind: "book_flight", id: "trip:u3:2:0", outboxSeq: 103},
		{kind: "book_flight", id: "trip:u4:2:0", outboxSeq: 104},
		{kind: "book_hotel", id: "trip:u1:2:1", outboxSeq: 105},
		{kind: "book_hotel", id: "trip:u2:2:1", outboxSeq: 106, settled: ops.AuditRetried},
		{kind: "book_hotel", id: "trip:u5:2:1", outboxSeq: 107, settled: ops.AuditDiscarded},
	}
	makeOldDLQ(t, js, ns, letters)
	dir := t.TempDir()
	env := []string{"ESJET_DEMO_SERVICES=false"}

	// Killed while copying (after the 3rd letter): nothing is cut.
	_, stderr, code := runCLIFailEnv(t, dir, append(env, failpoint.EnvVar+"="+failpoint.DLQMigrateCopy+"=kill@3"), "--url", url, "provision")
	if code != -1 {
		t.Fatalf("provision exited %d, want killed at %s:\n%s", code, failpoint.DLQMigrateCopy, stderr)
	}
	legacy := dlqSubjects(t, js, ns, wire.LegacyDeadLetterFilter(ns))
	if legacy[wire.LegacyDeadLetterSubject(ns, "book_flight")] != 4 || legacy[wire.LegacyDeadLetterSubject(ns, "book_hotel")] != 3 {
		t.Fatalf("after a kill while copying, the older subjects hold %v; want all 7 letters", legacy)
	}
	// Killed again, after the update and before the older subjects are
	// emptied.
	_, stderr, code = runCLIFailEnv(t, dir, append(env, failpoint.EnvVar+"="+failpoint.DLQMigrateUpdated+"=kill"), "--url", url, "provision")
	if code != -1 {
		t.Fatalf("provision exited %d, want killed at %s:\n%s", code, failpoint.DLQMigrateUpdated, stderr)
	}
	// A node that may not update streams refuses to start while older
	// letters are left.
	code, stderr = runBounded(t, dir, env, "run", "--url", url, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0")
	if code == 0 || !strings.Contains(stderr, "older dead letters") || !strings.Contains(stderr, "esjet provision") {
		t.Fatalf("a node started on a half-moved DLQ (exit %d):\n%s", code, stderr)
	}
	out, stderr, code := runCLIFailEnv(t, dir, env, "--url", url, "provision")
	if code != 0 {
		t.Fatalf("provision: exit %d\n%s%s", code, out, stderr)
	}
	t.Logf("esjet provision, run a third time:\n%s", out)

	// Every open letter once on its own subject, every settled one's audit
	// record and copy on theirs; the older subjects empty (their marks
	// expire within a second or two).
	open := dlqSubjects(t, js, ns, wire.DeadLetterFilter(ns))
	audits := dlqSubjects(t, js, ns, wire.AuditFilter(ns))
	settled := dlqSubjects(t, js, ns, wire.SettledFilter(ns))
	st, err := js.Stream(t.Context(), streams.NamesFor(ns).DLQ)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, l := range letters {
		if l.settled != "" {
			if audits[wire.AuditSubject(ns, l.kind, l.seq)] != 1 || settled[wire.SettledSubject(ns, l.kind, l.seq)] != 1 {
				t.Errorf("settled letter %s (seq %d): audit records %v, settled copies %v", l.id, l.seq, audits, settled)
			}
			continue
		}
		want++
		subj := wire.DeadLetterSubject(ns, l.kind, l.outboxSeq)
		if open[subj] != 1 {
			t.Errorf("open letter %s: %d message(s) on %s", l.id, open[subj], subj)
			continue
		}
		m, err := st.GetLastMsgForSubject(t.Context(), subj)
		if err != nil {
			t.Fatal(err)
		}
		if dl := wire.DecodeDeadLetter(m); dl.ID != l.id || dl.Kind != l.kind || dl.OutboxSeq != l.outboxSeq || dl.Error != "no seats" || dl.Attempts != 3 {
			t.Errorf("open letter %s moved as %+v", l.id, dl)
		}
	}
	if len(open) != want {
		t.Errorf("%d dead letter subjects, want %d: %v", len(open), want, open)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		return len(dlqSubjects(t, js, ns, wire.LegacyDeadLetterFilter(ns)))+len(dlqSubjects(t, js, ns, wire.LegacyAuditFilter(ns))) == 0
	})

	// The node starts, and its operator tools see and act on the moved
	// letters.
	n := startNodeEnv(t, t.TempDir(), env, "--url", url)
	ls := runCLI(t, dir, "--url", url, "dlq", "ls")
	for _, l := range letters {
		if strings.Contains(ls, l.id+" ") != (l.settled == "") {
			t.Errorf("dlq ls lists %s: %v, want %v:\n%s", l.id, !(l.settled == ""), l.settled == "", ls)
		}
	}
	show := runCLI(t, dir, "--url", url, "dlq", "show", "trip:u2:2:0")
	if !strings.Contains(show, "discarded by old-operator") || !strings.Contains(show, "handled by phone") {
		t.Errorf("dlq show of an older discarded letter:\n%s", show)
	}
	runCLI(t, dir, "--url", url, "dlq", "discard", "trip:u1:2:0", "--reason", "after the upgrade")
	runCLI(t, dir, "--url", url, "dlq", "retry", "trip:u1:2:1", "--after-failed")
	ls = runCLI(t, dir, "--url", url, "dlq", "ls")
	for id, listed := range map[string]bool{"trip:u1:2:0": false, "trip:u1:2:1": false, "trip:u5:2:1": false, "trip:u3:2:0": true, "trip:u4:2:0": true} {
		if strings.Contains(ls, id+" ") != listed {
			t.Errorf("after a discard and a retry, dlq ls lists %s: %v, want %v:\n%s", id, !listed, listed, ls)
		}
	}
	n.stop(t, syscall.SIGTERM)
}

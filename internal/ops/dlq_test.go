package ops

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// delivered returns the OUTBOX message at seq as a worker gets it.
func (e *rcEnv) delivered(seq uint64) *nats.Msg {
	e.t.Helper()
	st, err := e.js.Stream(e.t.Context(), e.names.Outbox)
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := st.GetMsg(e.t.Context(), seq)
	if err != nil {
		e.t.Fatalf("outbox seq %d: %v", seq, err)
	}
	return &nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data}
}

// kill dead-letters the OUTBOX copy at outboxSeq as a worker does: the DLQ
// entry, then a failed receipt. It returns the DLQ ack.
func (e *rcEnv) kill(outboxSeq uint64, reason string, at time.Time) *jetstream.PubAck {
	e.t.Helper()
	m := e.delivered(outboxSeq)
	ack, err := e.js.PublishMsg(e.t.Context(), wire.DeadLetterMsg(e.ns, m, outboxSeq, reason, 3, "node-1", at))
	if err != nil {
		e.t.Fatalf("dead letter: %v", err)
	}
	e.putReceipt(m.Header.Get(wire.HeaderCommandID), m.Header.Get(wire.HeaderCommandKind), wire.OutcomeFailed)
	return ack
}

func (e *rcEnv) dlqStream() jetstream.Stream {
	e.t.Helper()
	st, err := e.js.Stream(e.t.Context(), e.names.DLQ)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// subjectMsgs is how many messages the DLQ holds on filter.
func (e *rcEnv) dlqCount(filter string) uint64 {
	e.t.Helper()
	info, err := e.dlqStream().Info(e.t.Context(), jetstream.WithSubjectFilter(filter))
	if err != nil {
		e.t.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

// deadCount is how many dead letters `esjet dlq ls` lists: the entries no
// audit record settled.
func (e *rcEnv) deadCount() int {
	e.t.Helper()
	list, err := OpenDLQ(e.js, e.ns).List(e.t.Context(), Filter{})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(list)
}

// outboxCopies are the messages on <ns>.outbox.> about command id.
func (e *rcEnv) outboxCopies(id string) []*jetstream.RawStreamMsg {
	e.t.Helper()
	sc := streams.NewScanner(e.js, e.names.Outbox, 100)
	defer sc.Close()
	var out []*jetstream.RawStreamMsg
	if _, err := sc.Scan(e.t.Context(), streams.ScanRange{Filter: e.names.OutboxFilter()}, func(m *jetstream.RawStreamMsg) error {
		if m.Header.Get(wire.HeaderCommandID) == id {
			out = append(out, m)
		}
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// relayed appends a decision of trip/<id> issuing one command of kind and
// stores it in OUTBOX as the relay would.
func (e *rcEnv) relayed(id, kind string) (streams.Record, uint64) {
	e.t.Helper()
	rec := e.decide(id, streams.Command{Kind: kind, Payload: json.RawMessage(`{"n":1}`), Report: true})
	return rec, e.publish(rec, 0).Sequence
}

func TestDeadLetterMsgCarriesTheCommandAndIsWrittenOncePerDeliveredCopy(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	ctx := t.Context()
	rec, err := e.log.Append(ctx, streams.Decision{
		ID: uuid.NewString(), AggregateType: "trip", AggregateID: "t1", Events: []streams.Event{{Type: "happened"}},
		Commands:      []streams.Command{{Kind: "book_hotel", Payload: json.RawMessage(`{"hotel":"h1"}`), Report: true}},
		CorrelationID: "corr-1", TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	}, streams.Position{})
	if err != nil {
		t.Fatal(err)
	}
	seq := e.publish(rec, 0).Sequence
	delivered := e.delivered(seq)
	at := time.Date(2025, 3, 4, 5, 6, 7, 891, time.UTC)
	m := wire.DeadLetterMsg(e.ns, delivered, seq, "supplier said no\nat line 2\r\n", 4, "node-7", at)

	id := rec.Commands[0].ID
	if m.Subject != wire.DeadLetterSubject(e.ns, "book_hotel", seq) || string(m.Data) != `{"hotel":"h1"}` {
		t.Fatalf("subject %q, body %s", m.Subject, m.Data)
	}
	for _, k := range []string{wire.HeaderCommandID, wire.HeaderCommandKind, wire.HeaderAggregateType, wire.HeaderAggregateID, wire.HeaderVersion,
		wire.HeaderDecisionID, wire.HeaderDecisionSeq, wire.HeaderReport, wire.HeaderCorrelationID, wire.HeaderTraceParent} {
		if got, want := m.Header.Get(k), delivered.Header.Get(k); got == "" || got != want {
			t.Errorf("header %s = %q, want %q (the delivered message's)", k, got, want)
		}
	}
	want := map[string]string{
		wire.HeaderError: "supplier said no at line 2", wire.HeaderAttempts: "4", wire.HeaderWorker: "node-7",
		wire.HeaderDeadAt: "2025-03-04T05:06:07.000000891Z", wire.HeaderOutboxSeq: strconv.FormatUint(seq, 10),
		jetstream.MsgIDHeader: "dlq:" + id + ":" + strconv.FormatUint(seq, 10),
	}
	for k, v := range want {
		if got := m.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}

	// A worker that crashed between the DLQ write and its term writes the
	// same entry again: deduplicated.
	first, err := e.js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.js.PublishMsg(ctx, wire.DeadLetterMsg(e.ns, delivered, seq, "supplier said no", 5, "node-8", at.Add(time.Second)))
	if err != nil || !again.Duplicate || again.Sequence != first.Sequence {
		t.Fatalf("second write of the same entry: %+v, %v; want a duplicate of seq %d", again, err, first.Sequence)
	}

	// Re-driven, the command fails again: a new entry.
	d := OpenDLQ(e.js, e.ns)
	dl, err := d.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if dl.Seq != first.Sequence || dl.Error != "supplier said no at line 2" || dl.Attempts != 4 || dl.Worker != "node-7" ||
		!dl.DeadAt.Equal(at) || dl.OutboxSeq != seq || dl.AggregateType != "trip" || dl.AggregateID != "t1" ||
		dl.AggregateVersion != 1 || dl.DecisionID != rec.ID || dl.DecisionSeq != rec.Seq || dl.CorrelationID != "corr-1" ||
		string(dl.Payload) != `{"hotel":"h1"}` {
		t.Fatalf("dead letter read back: %+v", dl)
	}
	if _, err := d.Retry(ctx, dl, "ops@test", RetryUnlessReportedFailure); err != nil {
		t.Fatal(err)
	}
	copies := e.outboxCopies(id)
	if len(copies) != 2 {
		t.Fatalf("outbox copies after retry: %d", len(copies))
	}
	redriven := copies[1]
	second, err := e.js.PublishMsg(ctx, wire.DeadLetterMsg(e.ns, &nats.Msg{Subject: redriven.Subject, Header: redriven.Header, Data: redriven.Data},
		redriven.Sequence, "still no", 2, "node-1", time.Now()))
	if err != nil || second.Duplicate || second.Sequence == first.Sequence {
		t.Fatalf("failure after a re-drive: %+v, %v; want a new entry", second, err)
	}
	if n := e.deadCount(); n != 1 {
		t.Fatalf("dead letters: %d, want 1 (the first one was retried)", n)
	}
}

func TestDLQListFiltersByKindErrorAndAge(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	ctx := t.Context()
	now := time.Now()
	_, s1 := e.relayed("t1", "book_hotel")
	_, s2 := e.relayed("t2", "book_hotel")
	_, s3 := e.relayed("t3", "pay")
	_, s4 := e.relayed("t4", "pay")
	e.kill(s1, "HTTP 409 Conflict", now.Add(-2*time.Hour))
	e.kill(s2, "timeout after 5s", now.Add(-5*time.Minute))
	e.kill(s3, "HTTP 422: card declined", now.Add(-30*time.Minute))
	e.kill(s4, "http 409 conflict", now)
	d := OpenDLQ(e.js, e.ns)
	// An audit record is not a dead letter.
	gone, err := d.Get(ctx, "trip:t4:1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Discard(ctx, gone, "test", "ops"); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		f    Filter
		want []string
	}{
		{"all", Filter{}, []string{"t1", "t2", "t3"}},
		{"kind", Filter{Kind: "book_hotel"}, []string{"t1", "t2"}},
		{"error ignores case", Filter{ErrorContains: "CONFLICT"}, []string{"t1"}},
		{"older than 1h", Filter{OlderThan: time.Hour}, []string{"t1"}},
		{"newer than 10m", Filter{NewerThan: 10 * time.Minute}, []string{"t2"}},
		{"between", Filter{OlderThan: 10 * time.Minute, NewerThan: time.Hour}, []string{"t3"}},
		{"kind and error", Filter{Kind: "pay", ErrorContains: "declined"}, []string{"t3"}},
		{"no match", Filter{Kind: "nope"}, []string{}},
	} {
		got, err := d.List(ctx, tc.f)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		ids := rcIDs(got, func(dl DeadLetter) string { return dl.AggregateID })
		if !slices.Equal(ids, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, ids, tc.want)
		}
	}
	if _, err := d.List(ctx, Filter{Kind: "a.b"}); err == nil {
		t.Error("a kind with a dot: no error")
	}
}

func TestDLQShowFindsTheNewestEntryAndItsAuditHistory(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	ctx := t.Context()
	rec, seq := e.relayed("t1", "pay")
	id := rec.Commands[0].ID
	first := e.kill(seq, "first failure", time.Now())
	d := OpenDLQ(e.js, e.ns)
	dl, err := d.Get(ctx, strconv.FormatUint(first.Sequence, 10))
	if err != nil {
		t.Fatal(err)
	}
	msgID, err := d.Retry(ctx, dl, "ann@box", RetryUnlessReportedFailure)
	if err != nil {
		t.Fatal(err)
	}
	copies := e.outboxCopies(id)
	second := e.kill(copies[len(copies)-1].Sequence, "second failure", time.Now())

	for _, key := range []string{id, strconv.FormatUint(second.Sequence, 10)} {
		got, err := d.Show(ctx, key)
		if err != nil {
			t.Fatalf("show %s: %v", key, err)
		}
		if got.Seq != second.Sequence || got.Error != "second failure" || len(got.History) != 1 {
			t.Fatalf("show %s: %+v", key, got)
		}
		h := got.History[0]
		if h.Action != AuditRetried || h.DLQSeq != first.Sequence || h.Error != "first failure" || h.Attempts != 3 ||
			h.By != "ann@box" || h.NewOutboxMsgID != msgID || h.CommandID != id || h.Kind != "pay" || h.At.IsZero() {
			t.Fatalf("history: %+v", h)
		}
	}
	// The retried entry is gone: Get says what became of it, Show shows its
	// trail.
	_, err = d.Get(ctx, strconv.FormatUint(first.Sequence, 10))
	if !errors.Is(err, ErrDeadLetterNotFound) || !strings.Contains(err.Error(), "retried by ann@box") {
		t.Fatalf("get of a retried entry: %v", err)
	}
	old, err := d.Show(ctx, strconv.FormatUint(first.Sequence, 10))
	if err != nil || old.Settled == nil || old.Settled.Action != AuditRetried || old.Settled.NewOutboxMsgID != msgID ||
		old.Seq != first.Sequence || old.Error != "first failure" || len(old.History) != 1 {
		t.Fatalf("show of a retried entry: %+v, %v", old, err)
	}
	// The audit record's own sequence is not a dead letter either.
	if _, err := d.Show(ctx, strconv.FormatUint(second.Sequence-1, 10)); !errors.Is(err, ErrDeadLetterNotFound) {
		t.Fatalf("show of an audit record's seq: %v", err)
	}
	if _, err := d.Show(ctx, "trip:nope"); err == nil || !strings.Contains(err.Error(), "<type>:<id>:<version>:<index>") {
		t.Fatalf("bad id: %v", err)
	}
	if _, err := d.Show(ctx, "trip:t9:1:0"); !errors.Is(err, ErrDeadLetterNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}

func TestDLQRetryPutsTheCommandBackInOutboxWithANewMsgID(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	ctx := t.Context()
	rec, seq := e.relayed("t1", "pay")
	e.ackRelay(rec.Seq)
	id := rec.Commands[0].ID
	e.kill(seq, "card declined", time.Now())
	if rep := e.run(ReconcileConfig{}); rep.Totals.Dead != 1 || rep.Totals.InFlight != 0 || rep.Drift() != 0 {
		t.Fatalf("before retry: %+v", rep.Totals)
	}

	d := OpenDLQ(e.js, e.ns)
	dl, err := d.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	msgID, err := d.Retry(ctx, dl, "ops@test", RetryUnlessReportedFailure)
	if err != nil {
		t.Fatal(err)
	}
	if msgID != id+":redrive:"+strconv.FormatUint(dl.Seq, 10) {
		t.Fatalf("new msg id %q", msgID)
	}
	copies := e.outboxCopies(id)
	if len(copies) != 2 {
		t.Fatalf("OUTBOX copies of %s: %d, want the relay's and the re-drive", id, len(copies))
	}
	orig, re := copies[0], copies[1]
	// Low priority by default, so a bulk re-drive does not delay live
	// commands.
	if re.Subject != wire.BandSubject(e.ns, "pay", wire.PriorityLow) || re.Header.Get(wire.HeaderPriority) != wire.PriorityLow ||
		re.Header.Get(jetstream.MsgIDHeader) != msgID || string(re.Data) != string(orig.Data) {
		t.Fatalf("re-drive: %s %v %s", re.Subject, re.Header, re.Data)
	}
	for k := range orig.Header {
		if carriedByRedrive(k) && re.Header.Get(k) != orig.Header.Get(k) {
			t.Errorf("re-drive header %s = %q, the relay's copy has %q", k, re.Header.Get(k), orig.Header.Get(k))
		}
	}
	if n := len(slices.DeleteFunc(slices.Collect(maps.Keys(orig.Header)), func(k string) bool { return !carriedByRedrive(k) })); n < 9 {
		t.Fatalf("the relay's copy has only %d esjet headers: %v", n, orig.Header)
	}
	for _, k := range []string{wire.HeaderError, wire.HeaderAttempts, wire.HeaderWorker, wire.HeaderDeadAt, wire.HeaderOutboxSeq} {
		if re.Header.Get(k) != "" {
			t.Errorf("re-drive carries the dead-letter header %s", k)
		}
	}
	if n := e.deadCount(); n != 0 {
		t.Fatalf("dead letters after retry: %d", n)
	}
	// The letter leaves its subject (its mark expires); its whole copy stays
	// for streams.dlq_settled_max_age.
	if n := e.dlqCount(wire.SettledFilter(e.ns)); n != 1 {
		t.Fatalf("settled copies after retry: %d, want 1", n)
	}
	hist, err := d.History(ctx, id, "")
	if err != nil || len(hist) != 1 || hist[0].Action != AuditRetried || hist[0].NewOutboxSeq != re.Sequence {
		t.Fatalf("audit: %+v, %v", hist, err)
	}
	kv, _ := e.js.KeyValue(ctx, e.names.Receipts)
	if _, err := kv.Get(ctx, wire.ReceiptKey(id)); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the failed receipt survived the retry: %v", err)
	}
	// The entry is gone: retrying it again is an error and changes nothing.
	if _, err := d.Retry(ctx, dl, "ops@test", RetryUnlessReportedFailure); !errors.Is(err, ErrDeadLetterNotFound) {
		t.Fatalf("second retry: %v", err)
	}
	rep := e.run(ReconcileConfig{})
	c := rep.Kinds["pay"]
	if rep.Drift() != 0 || c.InFlight != 1 || c.Dead != 0 || c.Duplicates != 0 || c.Failed != 0 || c.InOutbox != 1 || c.Discarded != 0 {
		t.Fatalf("reconcile after retry: %+v (drift %d)", c, rep.Drift())
	}
	info, err := Inspect(e.js, e.ns).Command(ctx, id)
	if err != nil || len(info.Dead) != 0 || len(info.Outbox) != 2 {
		t.Fatalf("inspect after retry: %+v, %v", info, err)
	}
}

// A retry that crashed after OUTBOX acked the re-drive, before the audit
// record was written: running it again leaves one re-drive and one audit
// record.
func TestDLQRetryAfterACrashLeavesOneRedriveAndOneAuditRecord(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	ctx := t.Context()
	rec, seq := e.relayed("t1", "pay")
	id := rec.Commands[0].ID
	e.kill(seq, "boom", time.Now())
	d := OpenDLQ(e.js, e.ns)
	dl, err := d.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// The first run's writes, by hand.
	re := e.delivered(seq)
	re.Header.Set(jetstream.MsgIDHeader, wire.RedriveMsgID(id, dl.Seq))
	if _, err := e.js.PublishMsg(ctx, re); err != nil {
		t.Fatal(err)
	}

	if _, err := d.Retry(ctx, dl, "ops", RetryUnlessReportedFailure); err != nil {
		t.Fatal(err)
	}
	if n := len(e.outboxCopies(id)); n != 2 {
		t.Fatalf("OUTBOX copies: %d, want the relay's and one re-drive", n)
	}
	if hist, _ := d.History(ctx, id, "pay"); len(hist) != 1 || hist[0].By != "ops" {
		t.Fatalf("audit records: %+v", hist)
	}
	// Settled: a third run finds nothing to do and writes nothing.
	if _, err := d.Retry(ctx, dl, "ops", RetryUnlessReportedFailure); !errors.Is(err, ErrDeadLetterNotFound) {
		t.Fatalf("retry of a settled entry: %v", err)
	}
	if hist, _ := d.History(ctx, id, "pay"); len(hist) != 1 {
		t.Fatalf("audit records after a retry of a settled entry: %+v", hist)
	}
	if n := e.deadCount(); n != 0 {
		t.Fatalf("dead letters: %d", n)
	}
}

func TestDLQDiscardNeedsAReasonAndLeavesAnAuditRecord(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	ctx := t.Context()
	rec1, seq1 := e.relayed("t1", "pay")
	rec2, seq2 := e.relayed("t2", "pay")
	e.ackRelay(rec2.Seq)
	id1, id2 := rec1.Commands[0].ID, rec2.Commands[0].ID
	// Dead letters without receipts, so only the audit trail settles them:
	// t1 still in OUTBOX (in flight without it), t2 aged out of OUTBOX
	// (an orphan without it).
	for _, seq := range []uint64{seq1, seq2} {
		m := e.delivered(seq)
		if _, err := e.js.PublishMsg(ctx, wire.DeadLetterMsg(e.ns, m, seq, "gave up", 5, "n1", time.Now())); err != nil {
			t.Fatal(err)
		}
	}
	ost, _ := e.js.Stream(ctx, e.names.Outbox)
	if err := ost.DeleteMsg(ctx, seq2); err != nil {
		t.Fatal(err)
	}

	d := OpenDLQ(e.js, e.ns)
	dl1, err := d.Get(ctx, id1)
	if err != nil {
		t.Fatal(err)
	}
	for _, reason := range []string{"", "  \n"} {
		if err := d.Discard(ctx, dl1, reason, "ops"); !errors.Is(err, ErrReasonRequired) {
			t.Fatalf("discard with reason %q: %v", reason, err)
		}
	}
	if n := e.deadCount(); n != 2 {
		t.Fatalf("dead letters after refused discards: %d, want 2", n)
	}
	if n := e.dlqCount(wire.AuditFilter(e.ns)); n != 0 {
		t.Fatalf("audit records after refused discards: %d", n)
	}

	for _, id := range []string{id1, id2} {
		dl, err := d.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Discard(ctx, dl, "supplier gone for good", "ops@test"); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.deadCount(); n != 0 {
		t.Fatalf("dead letters after discard: %d", n)
	}
	hist, err := d.History(ctx, id1, "")
	if err != nil || len(hist) != 1 || hist[0].Action != AuditDiscarded || hist[0].Reason != "supplier gone for good" ||
		hist[0].By != "ops@test" || hist[0].Error != "gave up" || hist[0].Attempts != 5 || hist[0].NewOutboxMsgID != "" {
		t.Fatalf("audit: %+v, %v", hist, err)
	}

	// Show of a discarded letter tells its story from the audit trail, by
	// command id and by the DLQ sequence it had.
	for _, arg := range []string{id1, strconv.FormatUint(dl1.Seq, 10)} {
		det, err := d.Show(ctx, arg)
		if err != nil || det.Settled == nil || det.Settled.Action != AuditDiscarded || det.ID != id1 || det.Kind != "pay" ||
			det.Seq != dl1.Seq || det.Error != "gave up" || det.Attempts != 5 || len(det.History) != 1 {
			t.Fatalf("show %s after discard: %+v, %v", arg, det, err)
		}
	}
	if _, err := d.Show(ctx, "trip:nobody:1:0"); !errors.Is(err, ErrDeadLetterNotFound) {
		t.Fatalf("show of a command never dead: %v", err)
	}

	rep := e.run(ReconcileConfig{})
	c := rep.Kinds["pay"]
	if rep.Drift() != 0 || c.Discarded != 2 || c.Dead != 0 || c.InFlight != 0 || c.Orphans != 0 || rep.Scanned.Unidentified != 0 {
		t.Fatalf("reconcile after discard: %+v (drift %d)", c, rep.Drift())
	}
	if _, ok := rep.Kinds["audit.pay"]; ok {
		t.Fatal("reconcile took the audit records for a kind")
	}
	kinds, err := Inspect(e.js, e.ns).Kinds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		if k.Kind != "pay" || k.Dead != 0 {
			t.Fatalf("outbox kinds after discard: %+v", kinds)
		}
	}
}

// carriedByRedrive: the headers a re-drive keeps from the relay's copy
// (esjet's own, trace context, content type).
func carriedByRedrive(k string) bool {
	l := strings.ToLower(k)
	return strings.HasPrefix(l, "esjet-") || l == "traceparent" || l == "tracestate" || l == "content-type"
}

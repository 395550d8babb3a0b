package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// lookingFeedback records, for each report, what a DLQ operator could
// see at that moment: how many dead letters there were and the receipt.
type lookingFeedback struct {
	e       *wEnv
	t       *testing.T
	mu      sync.Mutex
	letters []int
	reports []wire.Report
}

func (f *lookingFeedback) Report(_ context.Context, r wire.Report) error {
	n := f.e.deadLetters(f.t)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.letters = append(f.letters, n)
	f.reports = append(f.reports, r)
	return nil
}

func (f *lookingFeedback) seen() ([]int, []wire.Report) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.letters...), append([]wire.Report(nil), f.reports...)
}

// TestAFailureIsReportedBeforeItsLetterCanBeRetried: the dead letter is
// the last thing written, so an operator who retries it the moment it
// shows finds the failure recorded (receipt and report) and never
// re-drives a command whose failure is recorded after the re-drive.
func TestAFailureIsReportedBeforeItsLetterCanBeRetried(t *testing.T) {
	e := newWEnv(t, natstest.RunServer(t))
	fb := &lookingFeedback{e: e, t: t}
	w := e.startWith(t, fast("book", HandlerFunc(func(context.Context, Delivery) (json.RawMessage, error) {
		return nil, Terminal(errors.New("no seats"))
	})), fb)
	id := e.command(t, "book", "o1", `{}`)
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Dead == 1 })
	letters, reports := fb.seen()
	if len(reports) != 1 || reports[0].Kind != "book_failed" {
		t.Fatalf("reports %+v", reports)
	}
	if letters[0] != 0 {
		t.Fatalf("the failure was reported with %d dead letter(s) already visible: a retry in between re-drives it", letters[0])
	}
	if rc, ok := e.receipt(t, id); !ok || rc.Outcome != wire.OutcomeFailed {
		t.Fatalf("receipt %+v %v", rc, ok)
	}
	if n := e.deadLetters(t); n != 1 {
		t.Fatalf("%d dead letters", n)
	}
}

// TestACommandWithAFailedReceiptNeverRunsAgain: a delivery that finds its
// command failed already (a crash after the failure was reported, before
// the letter or the term) finishes dead-lettering it with the same report
// and never calls the handler.
func TestACommandWithAFailedReceiptNeverRunsAgain(t *testing.T) {
	e := newWEnv(t, natstest.RunServer(t))
	kv, err := e.js.KeyValue(t.Context(), streams.NamesFor(e.ns).Receipts)
	if err != nil {
		t.Fatal(err)
	}
	id := "trip:o2:1:0"
	failed := wire.Receipt{CommandID: id, Kind: "book", Outcome: wire.OutcomeFailed, Attempts: 2, LastError: "no seats", At: time.Now().UTC()}
	if _, err := kv.Create(t.Context(), wire.ReceiptKey(id), failed.Encode()); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	w := e.start(t, fast("book", HandlerFunc(func(context.Context, Delivery) (json.RawMessage, error) {
		calls.Add(1)
		return json.RawMessage(`{}`), nil
	})))
	if got := e.command(t, "book", "o2", `{}`); got != id {
		t.Fatalf("command id %s", got)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Dead == 1 })
	if calls.Load() != 0 {
		t.Fatalf("a command failed already ran %d time(s) again", calls.Load())
	}
	reps := e.fb.all()
	if len(reps) != 1 || reps[0].Kind != "book_failed" {
		t.Fatalf("reports %+v", reps)
	}
	var out wire.Outcome
	_ = json.Unmarshal(reps[0].Payload, &out)
	if out.Error != "no seats" {
		t.Fatalf("reported error %q, want the first report's %q", out.Error, "no seats")
	}
	if n := e.deadLetters(t); n != 1 {
		t.Fatalf("%d dead letters", n)
	}
}

// TestASettledLetterIsNotReopenedByALaterCopy: a command's failed receipt
// records its dead letter, so a later copy of the command (a duplicate, or
// all of OUTBOX delivered again after a restore) neither runs it nor
// writes a second letter: after an operator settled the first, a new one
// would have reopened it.
func TestASettledLetterIsNotReopenedByALaterCopy(t *testing.T) {
	e := newWEnv(t, natstest.RunServer(t))
	var calls atomic.Int64
	w := e.start(t, fast("book", HandlerFunc(func(context.Context, Delivery) (json.RawMessage, error) {
		calls.Add(1)
		return nil, Terminal(errors.New("no seats"))
	})))
	id := e.command(t, "book", "o3", `{}`)
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Dead == 1 })
	var rc wire.Receipt
	natstest.Eventually(t, 5*time.Second, func() bool { rc, _ = e.receipt(t, id); return rc.DeadLetter != 0 })
	// Settled as an operator's discard does: a mark replaces the letter
	// on its subject and expires, leaving the subject empty.
	dlq, err := e.js.Stream(t.Context(), streams.NamesFor(e.ns).DLQ)
	if err != nil {
		t.Fatal(err)
	}
	letter, err := dlq.GetMsg(t.Context(), rc.DeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	mark := wire.SettleMark(letter.Subject, "discarded", rc.DeadLetter)
	if _, err := e.js.PublishMsg(t.Context(), mark, jetstream.WithMsgTTL(wire.SettleMarkTTL), jetstream.WithExpectLastSequencePerSubject(rc.DeadLetter)); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return e.deadLetters(t) == 0 })

	again := nats.NewMsg(wire.CommandSubject(e.ns, "book"))
	again.Data = []byte(`{}`)
	for k, v := range map[string]string{
		jetstream.MsgIDHeader: id + "/copy", wire.HeaderCommandID: id, wire.HeaderCommandKind: "book",
		wire.HeaderAggregateType: "trip", wire.HeaderAggregateID: "o3", wire.HeaderVersion: "1",
		wire.HeaderDecisionID: "d-o3", wire.HeaderReport: "true",
	} {
		again.Header.Set(k, v)
	}
	if _, err := e.js.PublishMsg(t.Context(), again); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Skipped == 1 })
	if calls.Load() != 1 {
		t.Errorf("the handler ran %d times, want once", calls.Load())
	}
	if n := e.deadLetters(t); n != 0 {
		t.Errorf("%d dead letter(s) after a later copy of a settled command, want none", n)
	}
}

package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	reports []Report
}

func (f *lookingFeedback) Report(_ context.Context, r Report) error {
	n := f.e.deadLetters(f.t)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.letters = append(f.letters, n)
	f.reports = append(f.reports, r)
	return nil
}

func (f *lookingFeedback) seen() ([]int, []Report) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.letters...), append([]Report(nil), f.reports...)
}

func (e *wEnv) startWith(t *testing.T, kc KindConfig, fb Feedback) *Worker {
	t.Helper()
	w, err := NewWorker(t.Context(), e.js, e.ns, kc, fb, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
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

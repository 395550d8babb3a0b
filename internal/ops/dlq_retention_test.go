package ops

import (
	"errors"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// A dead letter older than the receipts, whose command has none, may be of
// a command another copy carried out (its done receipt expired since):
// a re-drive is refused unless the operator says so. One with its failed
// receipt still there is re-driven as always.
func TestDLQRetryOfALetterOlderThanTheReceiptsNeedsPastReceipts(t *testing.T) {
	t.Parallel()
	e := newRCEnv(t, natstest.RunServer(t), streams.ProvisionConfig{ReceiptsMaxAge: 200 * time.Hour})
	ctx := t.Context()
	kept, keptSeq := e.relayed("kept", "pay")
	gone, goneSeq := e.relayed("gone", "pay")
	e.ackRelay(gone.Seq)
	e.kill(keptSeq, "card declined", time.Now())
	e.kill(goneSeq, "card declined", time.Now())
	kv, err := e.js.KeyValue(ctx, e.names.Receipts)
	if err != nil {
		t.Fatal(err)
	}
	goneID := gone.Commands[0].ID
	if err := kv.Delete(ctx, wire.ReceiptKey(goneID)); err != nil { // as if it had expired
		t.Fatal(err)
	}
	d := OpenDLQ(e.js, e.ns)
	d.now = func() time.Time { return time.Now().Add(300 * time.Hour) }

	dl, err := d.Get(ctx, kept.Commands[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Retry(ctx, dl, "ops@test", RetryUnlessReportedFailure); err != nil {
		t.Fatalf("a letter with its failed receipt: %v", err)
	}

	dl, err = d.Get(ctx, goneID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Retry(ctx, dl, "ops@test", RetryUnlessReportedFailure)
	var pe *PastReceiptsError
	if !errors.As(err, &pe) || !errors.Is(err, ErrPastReceipts) || pe.MaxAge != 200*time.Hour {
		t.Fatalf("retry of %s, 300h on with no receipt: %v, want a PastReceiptsError", goneID, err)
	}
	if n := len(e.outboxCopies(goneID)); n != 1 {
		t.Fatalf("refused, yet OUTBOX holds %d copies of %s", n, goneID)
	}
	if _, err := d.Retry(ctx, dl, "ops@test", RetryPastReceipts); err != nil {
		t.Fatalf("--past-receipts: %v", err)
	}
	if n := len(e.outboxCopies(goneID)); n != 2 {
		t.Fatalf("after --past-receipts OUTBOX holds %d copies of %s, want 2", n, goneID)
	}
}

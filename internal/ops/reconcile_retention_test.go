package ops

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// A restore (or an edge hub's sourcing) stores decisions anew: a command
// decided 10 days ago and aged out of OUTBOX before the backup is expired,
// not an orphan that --repair would publish (and a worker run) again.
func TestReconcileAgesACommandFromItsDecisionNotFromARestore(t *testing.T) {
	t.Parallel()
	e := newRCEnv(t, natstest.RunServer(t), streams.ProvisionConfig{})
	rec, err := e.log.Append(t.Context(), streams.Decision{ID: uuid.NewString(), AggregateType: "trip", AggregateID: "restored",
		Events:   []streams.Event{{Type: "happened", Time: time.Now().Add(-10 * 24 * time.Hour)}},
		Commands: []streams.Command{{Kind: "book_flight"}}}, streams.Position{})
	if err != nil {
		t.Fatal(err)
	}
	e.ackRelay(rec.Seq)
	rep := e.run(ReconcileConfig{Checkpoint: CheckpointOff})
	if c := rep.Kinds["book_flight"]; c.Expired != 1 || c.Orphans != 0 || rep.Drift() != 0 {
		t.Fatalf("a command decided 10 days ago, stored today: %+v, orphans %v", c, rep.Orphans)
	}
}

// With receipts that expire, a command older than them with no outcome is
// expired even while OUTBOX (kept longer by hand) would still count it an
// orphan: its receipt may be gone, and a repair could run it twice.
func TestReconcileCountsACommandOlderThanTheReceiptsAsExpired(t *testing.T) {
	t.Parallel()
	e := newRCEnv(t, natstest.RunServer(t), streams.ProvisionConfig{OutboxMaxAge: 400 * time.Hour, ReceiptsMaxAge: 200 * time.Hour})
	rec := e.decide("old", streams.Command{Kind: "book_flight"})
	e.ackRelay(rec.Seq)
	rep := e.run(ReconcileConfig{Checkpoint: CheckpointOff, Now: func() time.Time { return time.Now().Add(300 * time.Hour) }})
	if c := rep.Kinds["book_flight"]; c.Expired != 1 || c.Orphans != 0 || rep.ReceiptsMaxAge != 200*time.Hour {
		t.Fatalf("300h on, receipts kept 200h: %+v (receipts_max_age %s), orphans %v", c, rep.ReceiptsMaxAge, rep.Orphans)
	}
}

// Receipts that expire leave the bucket with fewer messages than the last
// run's checkpoint counted: the next run still starts from it.
func TestReconcileCheckpointOutlivesExpiredReceipts(t *testing.T) {
	t.Parallel()
	e := newRCEnv(t, natstest.RunServer(t), streams.ProvisionConfig{ReceiptsMaxAge: time.Second})
	rec := e.decide("done", streams.Command{Kind: "book_flight"})
	e.publish(rec, 0)
	e.ackRelay(rec.Seq)
	e.putReceipt(rec.Commands[0].ID, "book_flight", wire.OutcomeDone)
	cfg := ReconcileConfig{CheckpointFile: t.TempDir() + "/cp"}
	if rep := e.run(cfg); rep.Totals.Completed != 1 || !rep.Checkpoint.Saved {
		t.Fatalf("first run: %+v", rep.Totals)
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		st, err := e.js.Stream(t.Context(), wire.KVStream(e.names.Receipts))
		return err == nil && st.CachedInfo().State.Msgs == 0
	})
	rep := e.run(cfg)
	if !rep.Checkpoint.Incremental || rep.Checkpoint.FullBecause != "" || rep.Totals.Completed != 1 {
		t.Fatalf("after the receipt expired: checkpoint %+v, totals %+v", rep.Checkpoint, rep.Totals)
	}
}

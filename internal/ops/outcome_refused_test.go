package ops

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Issue 28 item 3: a command that ran but whose outcome its aggregate
// refused (the receipt says why) is listed by reconcile with the reason and
// counted by the outbox overview, run after run (it stays open).
func TestReconcileAndOutboxReportRefusedOutcomes(t *testing.T) {
	t.Parallel()
	e := newRCEnv(t, natstest.RunServer(t), streams.ProvisionConfig{})
	ctx := t.Context()
	rec, _ := e.relayed("t1", "pay")
	e.ackRelay(rec.Seq)
	id := rec.Commands[0].ID
	kv, err := e.js.KeyValue(ctx, e.names.Receipts)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(wire.Receipt{CommandID: id, Kind: "pay", Outcome: wire.OutcomeDone, Attempts: 1, At: time.Now(),
		OutcomeRefused: "pay_done refused by trip/t1: Decide recorded no event for it"})
	if _, err := kv.Put(ctx, wire.ReceiptKey(id), data); err != nil {
		t.Fatal(err)
	}
	for run := range 2 { // the second from the checkpoint
		rep := e.run(ReconcileConfig{})
		if rep.Totals.OutcomesRefused != 1 || len(rep.OutcomesRefused) != 1 || rep.OutcomesRefused[0].ID != id ||
			rep.OutcomesRefused[0].Reason == "" || rep.Totals.Completed != 1 {
			t.Fatalf("run %d: %+v, refused %+v", run, rep.Totals, rep.OutcomesRefused)
		}
	}
	kinds, err := Inspect(e.js, e.ns).Kinds(ctx)
	if err != nil || len(kinds) != 1 || kinds[0].OutcomesRefused != 1 {
		t.Fatalf("outbox kinds: %+v, %v", kinds, err)
	}
}

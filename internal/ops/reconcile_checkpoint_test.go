package ops

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// settle publishes every command of rec, records a done receipt for each,
// and (as the aggregate would) a done outcome.
func (e *rcEnv) settle(rec streams.Record) {
	e.t.Helper()
	for i, c := range rec.Commands {
		e.publish(rec, i)
		e.putReceipt(c.ID, c.Kind, wire.OutcomeDone)
		e.outcome(rec, i, wire.OutcomeDone)
	}
}

// outcome appends the decision recording command i of rec's outcome on
// its aggregate, as the framework's outcome path does.
func (e *rcEnv) outcome(rec streams.Record, i int, outcome string) streams.Record {
	e.t.Helper()
	c := rec.Commands[i]
	id := rec.AggregateID
	out, err := e.log.Append(e.t.Context(), streams.Decision{
		ID:             wire.OutcomeDecisionID(wire.OutcomeSpace(e.ns), rec.AggregateType, id, c.ID, outcome),
		AggregateType:  rec.AggregateType,
		AggregateID:    id,
		Events:         []streams.Event{{Type: c.Kind + "_" + outcome}},
		CausationID:    c.ID,
		IdempotencyKey: c.ID + "/" + outcome, // wire.DoneKey / wire.FailedKey
	}, e.pos[id])
	if err != nil {
		e.t.Fatalf("append %s outcome of %s: %v", outcome, c.ID, err)
	}
	e.pos[id] = out.Position()
	return out
}

// same says whether an incremental report matches a full one in
// everything but what was scanned.
func same(t *testing.T, inc, full Report) {
	t.Helper()
	if fmt.Sprint(inc.Kinds) != fmt.Sprint(full.Kinds) || inc.Totals != full.Totals ||
		!slices.Equal(inc.Orphans, full.Orphans) || !slices.Equal(inc.Duplicates, full.Duplicates) ||
		!slices.Equal(inc.LateEffects, full.LateEffects) || len(inc.Stuck) != len(full.Stuck) {
		t.Fatalf("incremental and full runs differ:\n inc  %+v %+v %+v %+v\n full %+v %+v %+v %+v",
			inc.Kinds, inc.Orphans, inc.Duplicates, inc.LateEffects, full.Kinds, full.Orphans, full.Duplicates, full.LateEffects)
	}
}

// A second run reads only what was stored since the first, keeps only the
// open commands, and reports what a full run reports.
func TestReconcileIncrementalReadsOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	flight := streams.Command{Kind: "book_flight"}
	var last streams.Record
	for i := range 20 {
		last = e.decide(fmt.Sprintf("t%d", i), flight)
		if i < 15 {
			e.settle(last)
		}
	}
	e.ackRelay(last.Seq)
	first := e.run(ReconcileConfig{})
	if first.Checkpoint.Incremental || first.Checkpoint.FullBecause == "" || !first.Checkpoint.Saved {
		t.Fatalf("first run: %+v, want a full run that saves a checkpoint", first.Checkpoint)
	}
	// 5 unpublished orphans stay open; the 15 settled are closed.
	if first.Checkpoint.Open != 5 || first.Totals.Completed != 15 || first.Totals.Orphans != 5 {
		t.Fatalf("first run: open %d, totals %+v", first.Checkpoint.Open, first.Totals)
	}
	// Two more decisions, one settled.
	a := e.decide("a", flight)
	e.settle(a)
	b := e.decide("b", flight)
	e.publish(b, 0)
	e.ackRelay(b.Seq)
	inc := e.run(ReconcileConfig{})
	if !inc.Checkpoint.Incremental || inc.Checkpoint.From.Events != first.EventsLastSeq {
		t.Fatalf("second run: %+v, want incremental from seq %d", inc.Checkpoint, first.EventsLastSeq)
	}
	// a's decision and outcome, b's decision; a's and b's copies; a's receipt.
	if inc.Scanned.Events != 3 || inc.Scanned.Outbox != 2 || inc.Scanned.Receipts != 1 {
		t.Fatalf("second run scanned %+v, want only what was stored since the first", inc.Scanned)
	}
	same(t, inc, e.run(ReconcileConfig{Checkpoint: CheckpointOff}))
	if inc.Checkpoint.Open != 6 { // the 5 orphans and b in flight
		t.Fatalf("open %d after the second run, want 6", inc.Checkpoint.Open)
	}
	full := e.run(ReconcileConfig{Checkpoint: CheckpointFull})
	if full.Checkpoint.Incremental || full.Scanned.Events != inc.EventsLastSeq {
		t.Fatalf("--full: %+v scanned %+v", full.Checkpoint, full.Scanned)
	}
	same(t, inc, full)
}

// Drift that appears after a checkpoint — a copy deleted from OUTBOX, a
// second copy of a settled command, an effect done after its aggregate was
// told it failed — is found by the next incremental run, exactly as a full
// run finds it.
func TestReconcileCheckpointNeverHidesDrift(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	ctx := t.Context()
	flight := streams.Command{Kind: "book_flight"}
	done := e.decide("done", flight)
	e.settle(done)
	inFlight := e.decide("flying", flight)
	e.publish(inFlight, 0)
	failing := e.decide("failing", flight)
	e.publish(failing, 0)
	e.ackRelay(failing.Seq)
	if rep := e.run(ReconcileConfig{}); rep.Drift() != 0 || rep.Checkpoint.Open != 2 {
		t.Fatalf("clean start: drift %d, open %d", rep.Drift(), rep.Checkpoint.Open)
	}
	check := func(what string, wantDrift uint64) Report {
		t.Helper()
		inc := e.run(ReconcileConfig{})
		same(t, inc, e.run(ReconcileConfig{Checkpoint: CheckpointOff}))
		if inc.Drift() != wantDrift {
			t.Fatalf("%s: drift %d, want %d: %+v", what, inc.Drift(), wantDrift, inc.Totals)
		}
		return inc
	}

	// 1. The open command's copy is deleted: an orphan.
	st, err := e.js.Stream(ctx, e.names.Outbox)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(ctx, wire.CommandSubject(e.ns, "book_flight"))
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= m.Sequence; seq++ {
		if m, err := st.GetMsg(ctx, seq); err == nil && m.Header.Get(wire.HeaderCommandID) == inFlight.Commands[0].ID {
			if err := st.DeleteMsg(ctx, seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	rep := check("deleted copy", 1)
	if len(rep.Orphans) != 1 || rep.Orphans[0].ID != inFlight.Commands[0].ID || !rep.Checkpoint.Incremental {
		t.Fatalf("deleted copy: orphans %+v, checkpoint %+v", rep.Orphans, rep.Checkpoint)
	}

	// 2. The settled command is stored again (a re-drive under another
	// Msg-Id): a duplicate, found by a run that starts over as a full one.
	dup := wire.EncodeCommand(e.ns, done, done.Commands[0], time.Now())
	dup.Header.Set(jetstream.MsgIDHeader, "again-"+uuid.NewString())
	if _, err := e.js.PublishMsg(ctx, dup); err != nil {
		t.Fatal(err)
	}
	rep = check("second copy of a settled command", 2)
	if len(rep.Duplicates) != 1 || rep.Duplicates[0].ID != done.Commands[0].ID || rep.Checkpoint.Incremental || rep.Checkpoint.FullBecause == "" {
		t.Fatalf("duplicate: %+v, checkpoint %+v", rep.Duplicates, rep.Checkpoint)
	}

	// 3. The aggregate is told the open command failed, then its effect
	// completes: a late effect.
	e.outcome(failing, 0, wire.OutcomeFailed)
	check("told failed", 2)
	e.putReceipt(failing.Commands[0].ID, "book_flight", wire.OutcomeDone)
	rep = check("late effect", 3)
	if len(rep.LateEffects) != 1 || rep.LateEffects[0].ID != failing.Commands[0].ID {
		t.Fatalf("late effects %+v", rep.LateEffects)
	}
	// Nothing changed: the next run reads nothing and reports the same.
	again := check("nothing new", 3)
	if again.Scanned != (Scanned{}) || !again.Checkpoint.Incremental {
		t.Fatalf("a run with nothing new scanned %+v (%+v)", again.Scanned, again.Checkpoint)
	}
}

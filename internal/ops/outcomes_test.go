package ops

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// tellFailed records what the worker's report of a dead letter records in
// the aggregate's log: a decision answering the command, keyed
// wire.FailedKey, caused by the command, with the outcome decision's id.
func (e *rcEnv) tellFailed(aggID, commandID string) streams.Record {
	e.t.Helper()
	return e.appendAnswer(aggID, commandID,
		wire.OutcomeDecisionID(wire.OutcomeSpace(e.ns), "trip", aggID, commandID, wire.OutcomeFailed))
}

// appendAnswer appends a decision with the key and causation id of
// commandID's failure report, under decision id id.
func (e *rcEnv) appendAnswer(aggID, commandID, id string) streams.Record {
	e.t.Helper()
	rec, err := e.log.Append(e.t.Context(), streams.Decision{
		ID: id, AggregateType: "trip", AggregateID: aggID,
		Events:         []streams.Event{{Type: "budget_lock_failed"}},
		IdempotencyKey: wire.FailedKey(commandID), CausationID: commandID,
	}, e.pos[aggID])
	if err != nil {
		e.t.Fatal(err)
	}
	e.pos[aggID] = rec.Position()
	return rec
}

// TestDLQRetryRefusesACommandItsAggregateWasToldFailed: issue 11 item 4. A
// dead letter whose aggregate already recorded <kind>_failed is not
// re-driven without the explicit override (the aggregate may have
// compensated); with it, it is. An effect that then completes is a late
// effect: reconcile counts it as drift and the inspector flags it.
func TestDLQRetryRefusesACommandItsAggregateWasToldFailed(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	ctx := t.Context()
	rec, seq := e.relayed("t1", "lock_budget")
	id := rec.Commands[0].ID
	e.kill(seq, "budget service says no", time.Now())
	told := e.tellFailed("t1", id)
	// An untold dead letter of another trip is re-driven as before.
	other, oseq := e.relayed("t2", "lock_budget")
	e.kill(oseq, "timeout", time.Now())
	e.ackRelay(other.Seq)

	d := OpenDLQ(e.js, e.ns)
	dl, err := d.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Retry(ctx, dl, "ops", RetryUnlessReportedFailure)
	var rf *ReportedFailureError
	if !errors.As(err, &rf) || !errors.Is(err, ErrReportedFailure) || rf.Told.Seq != told.Seq ||
		!strings.Contains(err.Error(), "trip/t1 was already told lock_budget_failed") || !strings.Contains(err.Error(), "--after-failed") {
		t.Fatalf("retry after the aggregate was told it failed: %v", err)
	}
	if n := len(e.outboxCopies(id)); n != 1 {
		t.Fatalf("refused retry left %d OUTBOX copies, want the relay's only", n)
	}
	if _, err := d.Get(ctx, id); err != nil {
		t.Fatalf("refused retry removed the dead letter: %v", err)
	}
	odl, err := d.Get(ctx, other.Commands[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Retry(ctx, odl, "ops", RetryUnlessReportedFailure); err != nil {
		t.Fatalf("retry of a dead letter nobody was told about: %v", err)
	}

	if _, err := d.Retry(ctx, dl, "ops", RetryAfterReportedFailure); err != nil {
		t.Fatalf("retry with the override: %v", err)
	}
	// The re-driven command succeeds: its effect is applied, and the
	// aggregate (which compensated) will refuse to hear about it.
	e.putReceipt(id, "lock_budget", wire.OutcomeDone)

	rep := e.run(ReconcileConfig{})
	if rep.Totals.LateEffects != 1 || rep.Drift() != 1 || len(rep.LateEffects) != 1 || rep.LateEffects[0].ID != id ||
		rep.LateEffects[0].Kind != "lock_budget" {
		t.Fatalf("reconcile after a late effect: totals %+v, late %+v, drift %d; want the one late effect as drift", rep.Totals, rep.LateEffects, rep.Drift())
	}
	info, err := Inspect(e.js, e.ns).Command(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !info.LateEffect || len(info.Reported) != 1 || info.Reported[0].Outcome != wire.OutcomeFailed || info.Reported[0].Seq != told.Seq {
		t.Fatalf("inspector: late effect %v, reported %+v", info.LateEffect, info.Reported)
	}
	oinfo, err := Inspect(e.js, e.ns).Command(ctx, other.Commands[0].ID)
	if err != nil || oinfo.LateEffect || len(oinfo.Reported) != 0 {
		t.Fatalf("inspector on an untold command: %+v, %v", oinfo, err)
	}
}

// TestAClientCommandKeyedLikeAFailureReportIsNotOne: a client may send any
// command with Idempotency-Key <command id>/failed and Esjet-Causation-Id
// <command id>. Its decision is not the worker's report (its id is derived
// in the client keys' UUID space), so it must not make dlq retry refuse,
// nor reconcile and the inspector call the command's effect late. Before,
// the operator tools went by the key and the causation id alone.
func TestAClientCommandKeyedLikeAFailureReportIsNotOne(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	ctx := t.Context()
	rec, seq := e.relayed("t1", "lock_budget")
	id := rec.Commands[0].ID
	e.kill(seq, "timeout", time.Now())
	e.appendAnswer("t1", id, uuid.NewString()) // what a client's keyed command records

	d := OpenDLQ(e.js, e.ns)
	dl, err := d.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	info, err := Inspect(e.js, e.ns).Command(ctx, id)
	if err != nil || len(info.Reported) != 0 {
		t.Fatalf("inspector takes a client's command for the failure report: reported %+v, %v", info.Reported, err)
	}
	if _, err := d.Retry(ctx, dl, "ops", RetryUnlessReportedFailure); err != nil {
		t.Fatalf("retry refused on a client's command keyed like the failure report: %v", err)
	}
	e.putReceipt(id, "lock_budget", wire.OutcomeDone)
	if rep := e.run(ReconcileConfig{}); rep.Totals.LateEffects != 0 {
		t.Fatalf("reconcile counts a late effect no report made: totals %+v, late %+v", rep.Totals, rep.LateEffects)
	}
}

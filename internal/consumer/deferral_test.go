package consumer

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/wire"
)

// commandOfSchema publishes a command of payload schema version schema, as a
// newer build's relay does.
func (e *wEnv) commandOfSchema(t *testing.T, kind, id string, schema int) string {
	t.Helper()
	rec := wire.Record{Decision: wire.Decision{ID: "d-" + id, AggregateType: "trip", AggregateID: id,
		Events: []wire.Event{{Type: "x", Version: 1}}}, Seq: 1}
	c := wire.Command{ID: wire.CommandID("trip", id, 1, 0), Kind: kind, Payload: json.RawMessage(`{"v":2}`), Report: true, Schema: schema}
	m := wire.EncodeCommand(e.ns, rec, c, time.Now())
	if _, err := e.js.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// Issue 32: a worker that understands only an older schema of its kind
// never runs a newer command: it leaves it, again and again, for longer
// than the kind's attempts, and a worker that understands it then runs it
// at its first attempt — the deferrals were counted in the workers'
// bucket, not as attempts — and the fleet's waiting count goes back to 0.
func TestANewerCommandWaitsForANewerWorkerWithoutBurningAttempts(t *testing.T) {
	s := natstest.RunServer(t)
	e := newWEnv(t, s)
	ctl, err := OpenControl(t.Context(), e.js, e.ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Stop()
	id := e.commandOfSchema(t, "ship", "v2", 2)

	var oldCalls atomic.Int32
	old := fast("ship", HandlerFunc(func(context.Context, Delivery) (json.RawMessage, error) {
		oldCalls.Add(1)
		return nil, nil
	}))
	old.MaxAttempts, old.BackoffMax, old.Control = 2, 50*time.Millisecond, ctl
	oldW, err := NewWorker(t.Context(), e.js, e.ns, old, e.fb, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- oldW.Run(ctx) }()
	natstest.Eventually(t, 20*time.Second, func() bool { return oldW.Stats().Deferred >= 5 })
	cancel()
	<-done
	if n := oldCalls.Load(); n != 0 {
		t.Fatalf("the old worker ran a command of a schema it does not understand %d times", n)
	}
	if waiting, err := ctl.Waiting(t.Context()); err != nil || waiting["ship"] != 1 {
		t.Fatalf("waiting for a newer worker: %v, %v; want ship: 1", waiting, err)
	}

	var got atomic.Pointer[Delivery]
	newer := fast("ship", HandlerFunc(func(_ context.Context, d Delivery) (json.RawMessage, error) {
		got.Store(&d)
		return json.RawMessage(`{"ok":true}`), nil
	}))
	newer.MaxAttempts, newer.Schema, newer.Control = 2, 2, ctl
	e.start(t, newer)
	natstest.Eventually(t, 20*time.Second, func() bool {
		rc, ok := e.receipt(t, id)
		return ok && rc.Outcome == wire.OutcomeDone
	})
	d := got.Load()
	if d == nil || d.Schema != 2 || d.Attempt != 1 || d.Deferred < 5 {
		t.Fatalf("the newer worker's delivery: %+v; want schema 2, attempt 1, deferred ≥ 5", d)
	}
	if rc, _ := e.receipt(t, id); rc.Attempts != 1 {
		t.Errorf("receipt attempts %d, want 1", rc.Attempts)
	}
	if n := e.deadLetters(t); n != 0 {
		t.Errorf("%d dead letters, want none", n)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		waiting, err := ctl.Waiting(t.Context())
		return err == nil && waiting["ship"] == 0
	})
}

// A schema header that is not a version is a foreign message: dead-lettered
// as poison, never run nor deferred for ever.
func TestACommandWithAnUnreadableSchemaIsPoison(t *testing.T) {
	s := natstest.RunServer(t)
	e := newWEnv(t, s)
	m := nats.NewMsg(wire.CommandSubject(e.ns, "ship"))
	m.Data = []byte(`{}`)
	for k, v := range map[string]string{jetstream.MsgIDHeader: "trip:p:1:0", wire.HeaderCommandID: "trip:p:1:0",
		wire.HeaderCommandKind: "ship", wire.HeaderCommandSchema: "two"} {
		m.Header.Set(k, v)
	}
	if _, err := e.js.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	w := e.start(t, fast("ship", HandlerFunc(func(context.Context, Delivery) (json.RawMessage, error) {
		calls.Add(1)
		return nil, nil
	})))
	// Dead counts the letter once written; Poison is counted before the
	// failure is recorded and the letter written, last.
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Dead == 1 })
	if calls.Load() != 0 || w.Stats().Poison != 1 || e.deadLetters(t) != 1 {
		t.Fatalf("calls %d, poison %d, dead letters %d; want 0, 1 and 1", calls.Load(), w.Stats().Poison, e.deadLetters(t))
	}
}

package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/wire"
	"github.com/esjet/esjet/receiver"
)

// TestDLQRetryRestoresFlowAndTheReceiverStillDedupes: a command fails
// terminally and is dead-lettered; the operator fixes the cause and
// re-drives it: it runs once more and completes. A second re-drive of an
// old copy finds the done receipt; and even a delivery that does reach the
// service is folded by the receiver's idempotency key.
func TestDLQRetryRestoresFlowAndTheReceiverStillDedupes(t *testing.T) {
	s := natstest.RunServer(t)
	e := newWEnv(t, s)
	rcv, err := receiver.New(t.Context(), e.js, receiver.Config{Bucket: e.ns + "_svc"})
	if err != nil {
		t.Fatal(err)
	}
	var broken atomic.Bool
	broken.Store(true)
	var effects atomic.Int64
	service := HandlerFunc(func(ctx context.Context, d Delivery) (json.RawMessage, error) {
		res, _, err := rcv.Do(ctx, d.IdempotencyKey(), d.Payload, func(ctx context.Context) (json.RawMessage, error) {
			if broken.Load() {
				return nil, errors.New("card declined")
			}
			effects.Add(1)
			return json.RawMessage(`{"charged":true}`), nil
		})
		if err != nil {
			return nil, Terminal(err)
		}
		return res, nil
	})
	w := e.start(t, fast("charge", service))
	id := e.command(t, "charge", "c1", `{"amount":7}`)
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Dead == 1 })

	dlq := ops.OpenDLQ(e.js, e.ns)
	dl, err := dlq.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	broken.Store(false) // the operator fixed the card
	if _, err := dlq.Retry(t.Context(), dl, "test", ops.RetryUnlessReportedFailure); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return w.Stats().Done == 1 })
	if rc, _ := e.receipt(t, id); rc.Outcome != wire.OutcomeDone {
		t.Fatalf("receipt after the re-drive: %+v", rc)
	}
	if effects.Load() != 1 {
		t.Fatalf("%d effects, want 1", effects.Load())
	}
	// The service itself folds a repeat of the key, worker or no worker.
	res, replayed, err := rcv.Do(t.Context(), id, []byte(`{"amount":7}`), func(context.Context) (json.RawMessage, error) {
		effects.Add(1)
		return nil, nil
	})
	if err != nil || !replayed || string(res) != `{"charged":true}` || effects.Load() != 1 {
		t.Fatalf("a repeat at the receiver: %s %v %v, %d effects", res, replayed, err, effects.Load())
	}
	if reps := e.fb.all(); len(reps) != 2 || reps[0].Kind != "charge_failed" || reps[1].Kind != "charge_done" {
		t.Fatalf("reports %+v: want the failure, then the success", reps)
	}
}

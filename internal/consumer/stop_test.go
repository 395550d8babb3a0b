package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/wire"
)

// A worker stopped while its target is unavailable does not hold the
// node's shutdown for the rest of the attempt's timeout (the node's grace
// is shorter, and it exits 1 when that runs out): it stops calling, hands
// the command back at once, and Run returns. Another worker then applies
// it, without waiting for the first one's AckWait.
func TestStopWhileTargetUnavailable(t *testing.T) {
	e := newWEnv(t, natstest.RunServer(t))
	called := make(chan struct{}, 1)
	down := HandlerFunc(func(context.Context, Delivery) (json.RawMessage, error) {
		select {
		case called <- struct{}{}:
		default:
		}
		return nil, Unavailable(errors.New("no service answers"))
	})
	kc := fast("lock", down)
	kc.Timeout = time.Minute
	kc.AckWait = 30 * time.Second // a hand-back must not wait for it
	w, err := NewWorker(t.Context(), e.js, e.ns, kc, e.fb, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	id := e.command(t, "lock", "s1", `{}`)
	select {
	case <-called:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler was never called")
	}
	stop()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run still waiting 20s after its stop: the unavailable target holds the shutdown for the attempt's whole timeout")
	}

	up := fast("lock", HandlerFunc(func(context.Context, Delivery) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }))
	up.AckWait = 30 * time.Second
	e.start(t, up)
	natstest.Eventually(t, 15*time.Second, func() bool {
		rc, ok := e.receipt(t, id)
		return ok && rc.Outcome == wire.OutcomeDone
	})
}

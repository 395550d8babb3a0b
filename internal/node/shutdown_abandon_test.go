package node

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/natstest"
)

// TestAStopWithinGraceHandsBackACallThatWaits: a call that waits for its
// target longer than the shutdown grace (a receiver that holds a killed
// attempt's claim for a minute) no longer makes a graceful stop give up
// and fail: as the grace runs out the call is abandoned and its command
// handed back, and the next node carries it out.
func TestAStopWithinGraceHandsBackACallThatWaits(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	ns := natstest.Namespace(t)
	cfg := testConfig(t, ns)
	cfg.NATS.Mode = config.ModeExternal
	cfg.NATS.External.URLs = []string{s.ClientURL()}
	cfg.Workers = map[string]config.Worker{
		"ship": {Target: config.TargetGo}, "charge": {Target: config.TargetNATS, Subject: ns + ".charge"},
		"refund": {Target: config.TargetNATS, Subject: ns + ".refund"}, "notify": {Target: config.TargetNATS, Subject: ns + ".notify"},
	}
	entered := make(chan struct{}, 1)
	waits := consumer.HandlerFunc(func(ctx context.Context, d consumer.Delivery) (json.RawMessage, error) {
		entered <- struct{}{}
		<-ctx.Done() // the target never answers within the grace
		return nil, ctx.Err()
	})
	opts := Options{Aggregates: []*aggregate.Definition{orderDefinition()}, Handlers: map[string]consumer.Handler{"ship": waits}}
	sctx, scancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer scancel()
	n, err := Start(sctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	nc, _ := natstest.Connect(t, s)
	for _, kind := range []string{"charge", "notify"} {
		if _, err := nc.Subscribe(ns+"."+kind, func(m *nats.Msg) { _ = m.Respond([]byte(`{"result":{}}`)) }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.API().Send(t.Context(), "order", "o1", "place", []byte(`{}`), api.Meta{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the ship call never started")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatalf("a graceful stop with a call waiting past its grace: %v, want a clean stop", err)
	}

	done := consumer.HandlerFunc(func(context.Context, consumer.Delivery) (json.RawMessage, error) {
		return json.RawMessage(`{"ref":"S-1"}`), nil
	})
	next := startTestNode(t, cfg, Options{Aggregates: []*aggregate.Definition{orderDefinition()}, Handlers: map[string]consumer.Handler{"ship": done}})
	natstest.Eventually(t, 60*time.Second, func() bool {
		st, err := next.API().State(t.Context(), "order", "o1")
		return err == nil && st.Value.(order).Shipped == 1
	})
}

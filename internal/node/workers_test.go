package node

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/natstest"
)

type order struct{ Shipped, ShipFailed int }

// orderDefinition issues ship, charge and refund and handles their
// outcomes; notify it issues without waiting for an outcome (invisible).
func orderDefinition() *aggregate.Definition {
	def := aggregate.Define("order", 1, func(s order, e aggregate.Event) order {
		switch e.Type {
		case "shipped":
			s.Shipped++
		case "ship_failed":
			s.ShipFailed++
		}
		return s
	})
	outcome := func(event string) func(order, aggregate.Outcome) (aggregate.Decision, error) {
		return func(s order, o aggregate.Outcome) (aggregate.Decision, error) { return aggregate.Emit(event, o), nil }
	}
	aggregate.On(def, "place", func(s order, c struct{}) (aggregate.Decision, error) {
		return aggregate.Emit("placed", c).Issue("ship", c).Issue("charge", c).Issue("notify", c), nil
	})
	aggregate.On(def, aggregate.DoneKind("ship"), outcome("shipped"))
	aggregate.On(def, aggregate.FailedKind("ship"), outcome("ship_failed"))
	aggregate.On(def, aggregate.DoneKind("charge"), outcome("charged"))
	aggregate.On(def, aggregate.FailedKind("refund"), outcome("refund_failed"))
	return def.Definition()
}

func TestIssuedKindsAreTheKindsWithOutcomes(t *testing.T) {
	got := issuedKinds([]*aggregate.Definition{orderDefinition()})
	want := []issuedKind{{"charge", "order"}, {"refund", "order"}, {"ship", "order"}}
	if len(got) != len(want) {
		t.Fatalf("issuedKinds = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("issuedKinds = %v, want %v", got, want)
		}
	}
}

// TestStartWarnsAboutKindsWithoutTarget pins the first hour's silent stall:
// a kind an aggregate issues with no worker anywhere on the node is named at
// WARN when the node starts, with what to configure; a kind with a target
// (here a Go handler) is not.
func TestStartWarnsAboutKindsWithoutTarget(t *testing.T) {
	cfg := testConfig(t, "warnkinds")
	cfg.Workers = map[string]config.Worker{"refund": {Target: config.TargetHTTP, URL: "http://127.0.0.1:1/refund"}}
	cfg.Aggregates.Raw = map[string]config.RawType{"invoice": {Commands: []string{"send_invoice", "charge"}}}
	var logs natstest.Buffer
	startTestNode(t, cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Aggregates: []*aggregate.Definition{orderDefinition()},
		Handlers: map[string]consumer.Handler{"charge": consumer.HandlerFunc(func(context.Context, consumer.Delivery) (json.RawMessage, error) {
			return nil, nil
		})}})
	var warned []string
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "has no target") {
			warned = append(warned, line)
		}
	}
	if len(warned) != 2 {
		t.Fatalf("want two WARN lines (ship of order, send_invoice of the raw type invoice), got %d:\n%s", len(warned), logs.String())
	}
	for i, wants := range [][]string{
		{"kind=send_invoice", "aggregate_type=invoice", "workers.send_invoice"},
		{"kind=ship", "aggregate_type=order", "workers.ship", "Go handler"},
	} {
		for _, want := range wants {
			if !strings.Contains(warned[i], want) {
				t.Errorf("WARN line does not say %q:\n%s", want, warned[i])
			}
		}
	}
}

func testConfig(t *testing.T, ns string) config.Config {
	cfg := config.Default()
	cfg.Namespace = ns
	cfg.NATS.Embedded.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.NATS.Embedded.Listen = config.ListenNone
	cfg.NATS.Embedded.Sync = config.SyncInterval
	cfg.HTTP.Listen = config.ListenNone
	return cfg
}

func startTestNode(t *testing.T, cfg config.Config, opts Options) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.Close(cctx); err != nil {
			t.Error(err)
		}
	})
	return n
}

// TestTargetDownForSecondsIsRiddenOut pins issue 11's "the default retry
// horizon is ~7 s": with the default worker settings a NATS target that
// answers nobody for 9 s (a restart) delays the command; it is carried out
// when the target is back, not dead-lettered. (The old defaults, 5 attempts
// from 500ms, gave up after 7.5 s.)
func TestTargetDownForSecondsIsRiddenOut(t *testing.T) {
	cfg := testConfig(t, "ridesout")
	cfg.Workers = map[string]config.Worker{
		"ship": {Target: config.TargetNATS, Subject: "ridesout.ship"}, "charge": {Target: config.TargetNATS, Subject: "ridesout.charge"},
		"refund": {Target: config.TargetNATS, Subject: "ridesout.refund"}, "notify": {Target: config.TargetNATS, Subject: "ridesout.notify"},
	}
	n := startTestNode(t, cfg, Options{Aggregates: []*aggregate.Definition{orderDefinition()}})
	nc := n.Broker().Conn()
	for _, kind := range []string{"charge", "notify"} {
		sub, err := nc.Subscribe("ridesout."+kind, func(m *nats.Msg) { _ = m.Respond([]byte(`{"result":{}}`)) })
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
	}
	if _, err := n.API().Send(t.Context(), "order", "o1", "place", []byte(`{}`), api.Meta{}); err != nil {
		t.Fatal(err)
	}
	// The ship target is down (no responders) for 9 s, then comes back.
	back := time.AfterFunc(9*time.Second, func() {
		_, _ = nc.Subscribe("ridesout.ship", func(m *nats.Msg) { _ = m.Respond([]byte(`{"result":{"ref":"S-1"}}`)) })
	})
	defer back.Stop()
	var o order
	natstest.Eventually(t, 90*time.Second, func() bool {
		st, err := n.API().State(t.Context(), "order", "o1")
		if err != nil {
			return false
		}
		o = st.Value.(order)
		return o.Shipped+o.ShipFailed > 0
	})
	if o.Shipped != 1 || o.ShipFailed != 0 {
		t.Fatalf("order after a 9 s outage of its ship target: %+v, want shipped, not failed", o)
	}
}

package node

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/natstest"
)

type order struct{}

// orderDefinition issues ship, charge and refund and handles their
// outcomes; notify it issues without waiting for an outcome (invisible).
func orderDefinition() *aggregate.Definition {
	def := aggregate.Define("order", 1, func(s order, e aggregate.Event) order { return s })
	outcome := func(s order, o aggregate.Outcome) (aggregate.Decision, error) { return aggregate.Decision{}, nil }
	aggregate.On(def, "place", func(s order, c struct{}) (aggregate.Decision, error) {
		return aggregate.Emit("placed", c).Issue("ship", c).Issue("charge", c).Issue("notify", c), nil
	})
	aggregate.On(def, aggregate.DoneKind("ship"), outcome)
	aggregate.On(def, aggregate.FailedKind("ship"), outcome)
	aggregate.On(def, aggregate.DoneKind("charge"), outcome)
	aggregate.On(def, aggregate.FailedKind("refund"), outcome)
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
	cfg := config.Default()
	cfg.Namespace = "warnkinds"
	cfg.NATS.Embedded.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.NATS.Embedded.Listen = config.ListenNone
	cfg.NATS.Embedded.Sync = config.SyncInterval
	cfg.HTTP.Listen = config.ListenNone
	cfg.Workers = map[string]config.Worker{"refund": {Target: config.TargetHTTP, URL: "http://127.0.0.1:1/refund"}}
	var logs natstest.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, cfg, Options{Logger: logger, Aggregates: []*aggregate.Definition{orderDefinition()},
		Handlers: map[string]consumer.Handler{"charge": consumer.HandlerFunc(func(context.Context, consumer.Delivery) (json.RawMessage, error) {
			return nil, nil
		})}})
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
	var warned []string
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "has no target") {
			warned = append(warned, line)
		}
	}
	if len(warned) != 1 {
		t.Fatalf("want one WARN line (for ship), got %d:\n%s", len(warned), logs.String())
	}
	for _, want := range []string{"kind=ship", "aggregate_type=order", "workers.ship", "Go handler"} {
		if !strings.Contains(warned[0], want) {
			t.Errorf("WARN line does not say %q:\n%s", want, warned[0])
		}
	}
}

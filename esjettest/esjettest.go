package esjettest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/config"
)

// Config returns the test configuration Start uses: namespace "test", data
// under tb.TempDir(), NATS and HTTP on random loopback ports, fsync by
// interval (a test does not need to survive power loss).
func Config(tb testing.TB) esjet.Config {
	cfg := esjet.DefaultConfig()
	cfg.Namespace = "test"
	cfg.NATS.Embedded.DataDir = filepath.Join(tb.TempDir(), "data")
	cfg.NATS.Embedded.Listen = "127.0.0.1:0"
	cfg.NATS.Embedded.Sync = config.SyncInterval
	cfg.HTTP.Listen = "127.0.0.1:0"
	return cfg
}

// Start starts a node serving aggregates with [Config] and closes it when
// the test ends.
func Start(tb testing.TB, aggregates ...*esjet.Definition) *esjet.Node {
	tb.Helper()
	return StartWith(tb, Config(tb), aggregates...)
}

// StartWith starts a node with cfg (start from [Config]).
func StartWith(tb testing.TB, cfg esjet.Config, aggregates ...*esjet.Definition) *esjet.Node {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := esjet.Start(ctx, esjet.Options{Config: cfg, Aggregates: aggregates})
	if err != nil {
		tb.Fatalf("esjettest: start node: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.Close(ctx); err != nil {
			tb.Errorf("esjettest: close node: %v", err)
		}
	})
	return n
}

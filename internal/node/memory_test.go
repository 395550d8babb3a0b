package node

import (
	"log/slog"
	"runtime/debug"
	"testing"

	"github.com/esjet/esjet/config"
)

// memory.limit becomes the process's soft memory limit, unless GOMEMLIMIT
// says otherwise or it is 0.
func TestMemoryLimitIsApplied(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	logger := slog.New(slog.DiscardHandler)

	t.Setenv("GOMEMLIMIT", "")
	debug.SetMemoryLimit(noMemoryLimit)
	if got := applyMemoryLimit(config.Memory{Limit: 300 * config.MiB}, logger); got != 300<<20 || debug.SetMemoryLimit(-1) != 300<<20 {
		t.Fatalf("limit in force %d (runtime %d), want 300MiB", got, debug.SetMemoryLimit(-1))
	}
	// 0 leaves the runtime's setting alone.
	if got := applyMemoryLimit(config.Memory{}, logger); got != 300<<20 {
		t.Fatalf("limit 0 changed the runtime's to %d", got)
	}
	// GOMEMLIMIT wins (the runtime read it at start; here it stands for that).
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(1 << 30)
	if got := applyMemoryLimit(config.Memory{Limit: 300 * config.MiB}, logger); got != 1<<30 {
		t.Fatalf("with GOMEMLIMIT set the limit became %d, want GOMEMLIMIT's 1GiB", got)
	}
}

// limitAfterStart starts a node with the default config and opts, from no
// memory limit, and returns the process's limit afterwards.
func limitAfterStart(t *testing.T, opts Options) int64 {
	t.Helper()
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	t.Setenv("GOMEMLIMIT", "")
	debug.SetMemoryLimit(noMemoryLimit)
	cfg := config.Default()
	cfg.NATS.Embedded.DataDir = t.TempDir()
	cfg.NATS.Embedded.Listen = config.ListenNone
	cfg.HTTP.Listen = config.ListenNone
	cfg.Demo.Services = false
	n, err := Start(t.Context(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(t.Context()) })
	return debug.SetMemoryLimit(-1)
}

// A node that owns its process (esjet run) runs under the default limit.
func TestNodeStartAppliesTheMemoryLimit(t *testing.T) {
	if got := limitAfterStart(t, Options{OwnsProcess: true}); got != int64(config.Default().Memory.Limit) {
		t.Fatalf("runtime memory limit %d, want memory.limit's default %d", got, config.Default().Memory.Limit)
	}
}

// A node embedded in another program leaves the process's memory limit to
// that program.
func TestAnEmbeddedNodeLeavesTheProcessMemoryLimitAlone(t *testing.T) {
	if got := limitAfterStart(t, Options{}); got != noMemoryLimit {
		t.Fatalf("runtime memory limit %d after an embedded node started, want it left at none", got)
	}
}

package node

import (
	"bytes"
	"log/slog"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/natstest"
)

// memory.limit becomes the process's soft memory limit, unless GOMEMLIMIT
// says otherwise or it is 0.
func TestMemoryLimitIsApplied(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	logger := slog.New(slog.DiscardHandler)

	t.Setenv("GOMEMLIMIT", "")
	debug.SetMemoryLimit(noMemoryLimit)
	got, stop := applyMemoryLimit(config.Memory{Limit: 300 * config.MiB}, logger)
	stop()
	if got != 300<<20 || debug.SetMemoryLimit(-1) != 300<<20 {
		t.Fatalf("limit in force %d (runtime %d), want 300MiB", got, debug.SetMemoryLimit(-1))
	}
	// 0 leaves the runtime's setting alone.
	if got, _ := applyMemoryLimit(config.Memory{}, logger); got != 300<<20 {
		t.Fatalf("limit 0 changed the runtime's to %d", got)
	}
	// GOMEMLIMIT wins (the runtime read it at start; here it stands for that).
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(1 << 30)
	if got, _ := applyMemoryLimit(config.Memory{Limit: 300 * config.MiB}, logger); got != 1<<30 {
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

// The soft limit is the budget while the live heap leaves the collector
// room under it, and the live heap plus half of it (plus the runtime's
// own memory) when it does not: a fixed limit below what is live made the
// collector run without pause (issue 30).
func TestGovernedLimitNeverSitsOnTheLiveHeap(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		budget, live, nonHeap, want int64
	}{
		{512 * mib, 100 * mib, 20 * mib, 512 * mib},
		{512 * mib, 300 * mib, 20 * mib, 512 * mib},
		{512 * mib, 400 * mib, 20 * mib, 620 * mib},
		{512 * mib, 1000 * mib, 40 * mib, 1540 * mib},
	} {
		if got := governedLimit(c.budget, c.live, c.nonHeap); got != c.want {
			t.Errorf("budget %d MiB, live %d MiB, runtime %d MiB: limit %d MiB, want %d MiB",
				c.budget/mib, c.live/mib, c.nonHeap/mib, got/mib, c.want/mib)
		}
	}
}

// The governor follows the live heap after each collection: above the
// budget while more is live, back to the budget once it is freed.
func TestMemoryGovernorRaisesTheLimitForLiveDataAndLowersItAgain(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	const budget = 64 << 20
	var logs lockedBuffer
	g := newMemoryGovernor(budget, slog.New(slog.NewTextHandler(&logs, nil)))
	stop := g.start(5 * time.Millisecond)
	defer stop()
	// 128 MiB live, in pointer-free chunks.
	live := make([][]byte, 128)
	for i := range live {
		live[i] = make([]byte, 1<<20)
		live[i][0] = byte(i)
	}
	var raised int64
	natstest.Eventually(t, 10*time.Second, func() bool {
		runtime.GC()
		raised = debug.SetMemoryLimit(-1)
		return raised >= budget+128<<20
	})
	runtime.KeepAlive(live)
	if n := strings.Count(logs.String(), "live memory has outgrown memory.limit"); n != 1 {
		t.Errorf("the raise was logged %d times, want once:\n%s", n, logs.String())
	}
	live = nil
	// Down by at least what was freed (other tests' heaps may keep it
	// above the budget).
	natstest.Eventually(t, 10*time.Second, func() bool {
		runtime.GC()
		l := debug.SetMemoryLimit(-1)
		return l <= raised-128<<20 && l >= budget
	})
	stop()
	stop() // idempotent
}

// lockedBuffer is a bytes.Buffer safe for a logger and a reader at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

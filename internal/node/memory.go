package node

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
	"time"

	"github.com/esjet/esjet/config"
)

// applyMemoryLimit makes memory.limit the process's memory budget and
// returns the soft limit in force afterwards; stop (never nil) ends the
// governor that keeps it (see memoryGovernor).
//
// Why a budget, measured in the scale phase (`esjet bench --phases
// scale`): the embedded server's file store reads a whole block (up to
// 8 MB) to serve one message and then holds it only weakly, so random
// reads leave hundreds of megabytes that are garbage as soon as the
// collector runs — but with GOGC pacing alone it runs only when the heap
// has doubled, and RSS follows the store's size.
//
// A GOMEMLIMIT environment variable is the operator's word for the whole
// process and wins; 0 leaves the runtime's setting as it is. The limit is
// the process's, not the node's: several nodes in one process share the
// last one set.
func applyMemoryLimit(cfg config.Memory, logger *slog.Logger) (limit int64, stop func()) {
	if env := os.Getenv("GOMEMLIMIT"); env != "" {
		if cfg.Limit > 0 {
			logger.Info("GOMEMLIMIT is set and wins over memory.limit", "gomemlimit", env, "memory_limit", cfg.Limit.String())
		}
		return debug.SetMemoryLimit(-1), func() {}
	}
	if cfg.Limit <= 0 {
		return debug.SetMemoryLimit(-1), func() {}
	}
	g := newMemoryGovernor(int64(cfg.Limit), logger)
	return g.adjust(), g.start(governorTick)
}

// noMemoryLimit is what debug.SetMemoryLimit reports when none is set.
const noMemoryLimit = math.MaxInt64

// liveHeadroom is the least room the collector gets above the live heap
// (as GOGC=50 would give): with it, a collection is due after the heap
// grew by half of what is live, so the collector's work per byte
// allocated stays at most twice GOGC=100's, however large the live heap.
const liveHeadroom = 0.5

// governorTick is how often the governor looks at the last collection.
const governorTick = 50 * time.Millisecond

// memoryGovernor holds the process's soft memory limit at the budget while
// the live heap leaves the collector room under it, and above the live
// heap by liveHeadroom when it does not.
//
// A fixed soft limit fights the collector once live data nears it: the
// embedded server keeps each block's per-subject index two minutes after
// the block's last read and a subject map as large as the aggregates, so a
// store of a month's decisions read at random holds several hundred
// megabytes live. Under a fixed 512MiB the collector then ran without
// pause, each run dropping the weakly held blocks the next reads needed,
// and a cold read took 50× as long (issue 30). The budget bounds what the
// server leaves behind (blocks, pooled buffers: garbage once collected),
// not what it holds live; when live data outgrows it the node says so and
// the heap grows with it.
type memoryGovernor struct {
	budget  int64
	logger  *slog.Logger
	samples []metrics.Sample
	cycles  uint64
	over    bool // the last adjustment raised the limit above the budget
}

func newMemoryGovernor(budget int64, logger *slog.Logger) *memoryGovernor {
	names := []string{
		"/gc/cycles/total:gc-cycles",
		"/gc/heap/live:bytes",
		"/memory/classes/total:bytes",
		"/memory/classes/heap/objects:bytes",
		"/memory/classes/heap/unused:bytes",
		"/memory/classes/heap/free:bytes",
		"/memory/classes/heap/released:bytes",
	}
	g := &memoryGovernor{budget: budget, logger: logger, samples: make([]metrics.Sample, len(names))}
	for i, n := range names {
		g.samples[i].Name = n
	}
	return g
}

// governedLimit is the soft limit for a live heap of live bytes and
// nonHeap bytes the runtime holds besides the heap (stacks, metadata).
func governedLimit(budget, live, nonHeap int64) int64 {
	return max(budget, nonHeap+live+int64(liveHeadroom*float64(live)))
}

// adjust sets the limit from the last collection's live heap and returns it.
func (g *memoryGovernor) adjust() int64 {
	metrics.Read(g.samples)
	u := func(i int) int64 { return int64(g.samples[i].Value.Uint64()) }
	g.cycles = g.samples[0].Value.Uint64()
	live := u(1)
	nonHeap := u(2) - u(3) - u(4) - u(5) - u(6)
	floor := governedLimit(0, live, nonHeap)
	limit := max(g.budget, floor)
	debug.SetMemoryLimit(limit)
	switch {
	case floor > g.budget && !g.over:
		g.logger.Warn("live memory has outgrown memory.limit: the heap may grow past it rather than collect without pause; raise memory.limit or run the server apart (nats.url)",
			"memory_limit", mib(g.budget), "live_heap", mib(live), "soft_limit", mib(limit))
		g.over = true
	case g.over && floor < g.budget*9/10:
		g.logger.Info("live memory is back under memory.limit", "memory_limit", mib(g.budget), "live_heap", mib(live))
		g.over = false
	}
	return limit
}

// mib shows a byte count in whole MiB, as the log reads it.
func mib(b int64) string { return strconv.FormatInt(b>>20, 10) + "MiB" }

// start runs the governor, adjusting after each collection it sees, until
// the returned stop is called (idempotent; it waits for the goroutine).
func (g *memoryGovernor) start(every time.Duration) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	sample := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				metrics.Read(sample)
				if sample[0].Value.Uint64() != g.cycles {
					g.adjust()
				}
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); <-done }) }
}

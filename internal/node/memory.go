package node

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"

	"github.com/esjet/esjet/config"
)

// applyMemoryLimit makes memory.limit the process's soft memory limit (Go's
// debug.SetMemoryLimit) and returns the limit in force afterwards.
//
// Why a limit, measured in the scale phase (`esjet bench --phases scale`):
// the embedded server's file store decompresses a whole block (up to 8 MB)
// to read one message from it and then holds that copy only weakly, so
// random reads over a large store leave hundreds of megabytes that are
// garbage as soon as the collector runs — but with GOGC pacing alone it
// runs only when the heap has doubled, and RSS follows the store's size.
// Near the limit the collector runs sooner and the copies go first.
//
// A GOMEMLIMIT environment variable is the operator's word for the whole
// process and wins; 0 leaves the runtime's setting as it is. The limit is
// the process's, not the node's: several nodes in one process share the
// last one set.
func applyMemoryLimit(cfg config.Memory, logger *slog.Logger) int64 {
	if env := os.Getenv("GOMEMLIMIT"); env != "" {
		if cfg.Limit > 0 {
			logger.Info("GOMEMLIMIT is set and wins over memory.limit", "gomemlimit", env, "memory_limit", cfg.Limit.String())
		}
		return debug.SetMemoryLimit(-1)
	}
	if cfg.Limit <= 0 {
		return debug.SetMemoryLimit(-1)
	}
	debug.SetMemoryLimit(int64(cfg.Limit))
	return int64(cfg.Limit)
}

// noMemoryLimit is what debug.SetMemoryLimit reports when none is set.
const noMemoryLimit = math.MaxInt64

package projection

import (
	"fmt"
	"testing"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// TestSingleProjectionAppliesEveryEventOnceAndResumesFromItsCheckpoint: a
// non-idempotent counter sees every event exactly once, across a restart of
// its runner in the middle of the log, and its checkpoint ends at the log's
// last position.
func TestSingleProjectionAppliesEveryEventOnceAndResumesFromItsCheckpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 50 {
		e.append(t, "order", fmt.Sprint("o", i%5), "placed", "priced")
	}
	stop := e.run(t, testConfig(), counter("counts"))
	eventually(t, "20 events of o0 counted", func() bool { return e.count(t, "counts", "o0") == 20 })
	stop()
	var last streams.Record
	for i := range 30 {
		last = e.append(t, "order", fmt.Sprint("o", i%5), "shipped")
	}
	e.run(t, testConfig(), counter("counts"))
	eventually(t, "checkpoint at the end", func() bool {
		return e.checkpoint(t, "counts", 1, 0).Position == wire.EndOfSeq(last.Seq)
	})
	for i := range 5 {
		if n := e.count(t, "counts", fmt.Sprint("o", i)); n != 26 {
			t.Errorf("o%d counted %d events, want 26", i, n)
		}
	}
}

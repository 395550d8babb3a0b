package ops

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// A run in chunks holds the open commands and one chunk's, not one entry
// per command of the log, and reports what a run in one go reports — also
// when a later message changes a command an earlier chunk had settled.
func TestReconcileInChunksHoldsOnlyTheOpenCommands(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	e := newRCEnv(t, s, streams.ProvisionConfig{})
	flight := streams.Command{Kind: "book_flight"}
	var first streams.Record
	for i := range 30 {
		rec := e.decide(fmt.Sprintf("t%d", i), flight)
		e.settle(rec) // published, done, outcome recorded: settled for good
		if i == 0 {
			first = rec
		}
	}
	orphan := e.decide("orphan", flight) // never published
	e.ackRelay(orphan.Seq)

	whole := e.run(ReconcileConfig{Checkpoint: CheckpointOff, Chunk: -1})
	if whole.Checkpoint.PeakHeld != 31 || whole.Totals.Completed != 30 || whole.Totals.Orphans != 1 {
		t.Fatalf("in one go: held %d, totals %+v; want 31 held, 30 completed, 1 orphan", whole.Checkpoint.PeakHeld, whole.Totals)
	}
	chunked := e.run(ReconcileConfig{Checkpoint: CheckpointOff, Chunk: 6}) // 3 decisions and their outcomes
	same(t, chunked, whole)
	if chunked.Checkpoint.PeakHeld > 5 || chunked.Scanned != whole.Scanned {
		t.Fatalf("in chunks: held %d commands at most (want ≤ 5 of 31), scanned %+v (want %+v)", chunked.Checkpoint.PeakHeld, chunked.Scanned, whole.Scanned)
	}
	// The checkpoint a run in chunks leaves is the one a run in one go
	// leaves: the next run starts from it and holds the orphan only.
	saved := e.run(ReconcileConfig{Checkpoint: CheckpointFull, Chunk: 6})
	same(t, saved, whole)
	if next := e.run(ReconcileConfig{}); !next.Checkpoint.Incremental || next.Checkpoint.Open != 1 {
		t.Fatalf("after a run in chunks: %+v, want an incremental run with the orphan open", next.Checkpoint)
	}

	// A second copy of the first command, stored after the chunk that
	// settled it.
	dup := wire.EncodeCommand(e.ns, first, first.Commands[0], time.Now())
	dup.Header.Set(jetstream.MsgIDHeader, "redrive-"+uuid.NewString())
	if _, err := e.js.PublishMsg(t.Context(), dup); err != nil {
		t.Fatal(err)
	}
	whole = e.run(ReconcileConfig{Checkpoint: CheckpointOff, Chunk: -1})
	if whole.Totals.Duplicates != 1 {
		t.Fatalf("in one go: totals %+v, want the duplicate", whole.Totals)
	}
	chunked = e.run(ReconcileConfig{Checkpoint: CheckpointOff, Chunk: 6})
	same(t, chunked, whole)
	if !strings.Contains(chunked.Checkpoint.FullBecause, first.Commands[0].ID) {
		t.Fatalf("in chunks: full because %q, want it to name %s", chunked.Checkpoint.FullBecause, first.Commands[0].ID)
	}
}

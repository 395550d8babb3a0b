package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Reading in chunks.
//
// A run that read every stream to its end before it classified anything
// held one entry per command of the log (and, at 3 million decisions, the
// node's memory followed). Instead a run reads the log a chunk of EVENTS
// messages at a time, with OUTBOX, the DLQ and the receipts read up to the
// time of the chunk's last decision — what the commands of the chunk can
// already have produced — and then settles for good the commands nothing
// but a new message could change (the checkpoint's rule, [closable]),
// keeping only their counts. The next chunk goes on as an incremental run
// would from a checkpoint taken there: a later message about a settled
// command (a second copy, a second outcome, a late receipt or dead letter)
// makes the run start over keeping every command, which says exactly what
// happened. The report and the checkpoint are the ones a run in one go
// writes; only memory differs: the open commands and one chunk's.

// DefaultReconcileChunk is [ReconcileConfig.Chunk]'s default.
const DefaultReconcileChunk = 100_000

// chunk is the configured chunk as a count of EVENTS messages; 0: one chunk.
func (r *Reconciler) chunk() uint64 {
	if r.cfg.Chunk < 0 {
		return 0
	}
	return uint64(r.cfg.Chunk)
}

// boundsAt returns the bounds of a chunk ending at EVENTS sequence
// eventsLast: each other stream up to its last message stored no later
// than that decision, between from and b.
func (r *Reconciler) boundsAt(ctx context.Context, from, b bounds, eventsLast uint64) (bounds, error) {
	to := b
	to.events.Last = eventsLast
	events, err := r.js.Stream(ctx, r.names.Events)
	if err != nil {
		return to, fmt.Errorf("reconcile: event log %s: %w", r.names.Events, err)
	}
	m, err := events.GetMsg(ctx, eventsLast)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		// Not there (deleted by hand): read the other streams to their
		// bounds with this chunk; what it settles stays right.
		return to, nil
	case err != nil:
		return to, fmt.Errorf("reconcile: read %s seq %d: %w", r.names.Events, eventsLast, err)
	}
	at := m.Time
	for _, st := range []struct {
		stream   string
		from, to *mark
	}{{r.names.Outbox, &from.outbox, &to.outbox}, {r.names.DLQ, &from.dlq, &to.dlq}, {wire.KVStream(r.names.Receipts), &from.receipts, &to.receipts}} {
		if st.to.Last <= st.from.Last {
			continue
		}
		last, err := r.lastStoredBy(ctx, st.stream, at)
		if err != nil {
			return to, err
		}
		st.to.Last = min(max(last, st.from.Last), st.to.Last)
	}
	return to, nil
}

// lastStoredBy is the sequence of stream's last message stored at or
// before at (0: none); a stream with nothing after at gives its last.
func (r *Reconciler) lastStoredBy(ctx context.Context, stream string, at time.Time) (uint64, error) {
	sc := streams.NewScanner(r.js, stream, 1)
	defer sc.Close()
	var next uint64
	n, err := sc.Scan(ctx, streams.ScanRange{Since: at.Add(time.Nanosecond)}, func(m *jetstream.RawStreamMsg) error {
		next = m.Sequence
		return streams.ErrStopScan
	})
	if err != nil {
		return 0, fmt.Errorf("reconcile: find %s's messages after %s: %w", stream, at.Format(time.RFC3339Nano), err)
	}
	if n == 0 {
		return ^uint64(0), nil // nothing after: its bound caps it
	}
	return next - 1, nil
}

// settleChunk drops from s the commands settled for good after a chunk
// that ended at to, keeping their counts, and makes s go on as an
// incremental run from there.
func (r *Reconciler) settleChunk(s *scan, rep *Report, to bounds) {
	scratch := Report{At: rep.At, RelayAckFloor: rep.RelayAckFloor, ExpiredBefore: rep.ExpiredBefore, Kinds: map[string]Counts{}}
	s.closed = r.classify(s, &scratch, rep.At, nil) // the earlier chunks' counts and this one's
	s.incremental, s.settledThrough = true, to.events.Last
}

package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Exactly once into OUTBOX without a time limit.
//
// OUTBOX drops a re-published command as a duplicate only inside its
// duplicate window (streams.outbox_duplicate_window). A relay that died
// after OUTBOX took a batch's commands and before it acked their decisions
// gets those decisions back — possibly long after the window, when a node
// stayed down — and its copies would be stored a second time. So a
// decision that may have been relayed before is looked up in OUTBOX first,
// and only the commands OUTBOX does not hold are published: on a command
// subject, as a pending schedule, or as a fired schedule (which keeps
// Esjet-Command-Id but not the Msg-Id) — the relay publishes a decision's
// commands only after reading it, so every copy is stored after it.
//
// A decision may have been relayed before when it is delivered again
// (NumDelivered > 1), when the relay is trying a batch again after a failed
// publish, or when it was stored before the relay started or lost its
// server: a server killed hard forgets the last deliveries of a consumer
// (their state is flushed to disk asynchronously), and those decisions come
// back as first deliveries. The hot path — a decision stored while this
// relay runs, delivered once — stays one publish per command and reads
// nothing.
//
// The lookups share one index of the command ids OUTBOX has stored since
// the oldest decision checked. It is read to OUTBOX's end once, then
// extended only when older than half the duplicate window: anything stored
// after the index last read OUTBOX is younger than the window, and OUTBOX
// itself drops its repeat. It is dropped at the first batch with nothing to
// check.

// clockSkew widens the OUTBOX scan before a decision's time: on a cluster
// EVENTS and OUTBOX may have leaders with different clocks.
const clockSkew = 5 * time.Second

// outboxIndex is the set of command ids OUTBOX has stored since a time.
type outboxIndex struct {
	since   time.Time // first stored time scanned (a decision's time − clockSkew)
	through uint64    // last OUTBOX sequence scanned
	read    time.Time // when it last read OUTBOX to its end
	ids     map[string]struct{}
}

// recheck says which decisions of a batch are checked against OUTBOX
// before their commands are published.
type recheck int

const (
	recheckSuspect recheck = iota // decisions that may have been relayed before
	recheckAll                    // every decision: the relay is trying the batch again
)

// suspect says whether a decision stored at stored and delivered
// delivered times may have been relayed before.
func (r *Relay) suspect(stored time.Time, delivered uint64) bool {
	return delivered > 1 || stored.UnixNano() < r.suspectBefore.Load()
}

// lostServer marks every decision stored until now as possibly relayed
// before: the relay's view of the server was interrupted.
func (r *Relay) lostServer() { r.suspectBefore.Store(time.Now().UnixNano()) }

// inOutbox returns which commands OUTBOX already holds, reading it from
// since on (extending the index, or rebuilding it when since is older than
// what it covers).
func (r *Relay) inOutbox(ctx context.Context, since time.Time) (map[string]struct{}, error) {
	since = since.Add(-clockSkew)
	if r.index == nil || since.Before(r.index.since) {
		r.index = &outboxIndex{since: since, ids: map[string]struct{}{}}
	} else if time.Since(r.index.read) < r.dedupWindow/2 {
		return r.index.ids, nil
	}
	// Read to OUTBOX's last sequence as its leader knows it: a replica that
	// is behind (restarted a moment ago) must not answer "not there" for a
	// command it has yet to receive.
	rng := streams.ScanRange{Since: r.index.since, ToLeaderLast: true}
	if r.index.through > 0 {
		rng = streams.ScanRange{From: r.index.through + 1, ToLeaderLast: true}
	}
	if r.scanner == nil {
		r.scanner = streams.NewScanner(r.js, r.names.Outbox, 1000)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.AckWait/2)
	defer cancel()
	idx := r.index
	read := time.Now()
	n, err := r.scanner.Scan(sctx, rng, func(m *jetstream.RawStreamMsg) error {
		if id := m.Header.Get(wire.HeaderCommandID); id != "" {
			idx.ids[id] = struct{}{}
		}
		idx.through = m.Sequence
		return nil
	})
	r.scanned.Add(int64(n))
	if err != nil {
		// What was read stays (through moved on): the next lookup goes on
		// from there, so a large OUTBOX is read across several tries
		// rather than started over each time.
		return nil, fmt.Errorf("read OUTBOX since %s (through seq %d so far): %w", idx.since.Format(time.RFC3339Nano), idx.through, err)
	}
	idx.read = read
	return idx.ids, nil
}

// forget drops the index: no decision of the batch needed it.
func (r *Relay) forget() { r.index = nil }

// closeScanner releases the scanner's subscription.
func (r *Relay) closeScanner() {
	if r.scanner != nil {
		_ = r.scanner.Close()
		r.scanner = nil
	}
}

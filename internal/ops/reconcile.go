package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// ReconcileConfig tunes a [Reconciler]. The zero value of every field means
// its default.
type ReconcileConfig struct {
	// StuckAfter: a command in flight whose newest OUTBOX copy is older
	// than this is reported stuck. Zero means 15m.
	StuckAfter time.Duration
	// Batch is how many messages one batched direct get asks for. Zero
	// means 1000.
	Batch int
	// Now is the clock that ages OUTBOX messages. Nil means time.Now.
	Now func() time.Time
}

func (c *ReconcileConfig) setDefaults() {
	if c.StuckAfter == 0 {
		c.StuckAfter = 15 * time.Minute
	}
	if c.Batch == 0 {
		c.Batch = 1000
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Reconciler compares the commands recorded in a namespace's event log with
// what OUTBOX, the receipts bucket and the DLQ hold, and re-publishes the
// orphans. It only reads, except in [Reconciler.Repair]. It is safe for
// concurrent use.
type Reconciler struct {
	js     jetstream.JetStream
	names  streams.Names
	cfg    ReconcileConfig
	logger *slog.Logger
}

// NewReconciler returns a Reconciler of namespace ns. It does no I/O; the
// streams must exist when it runs. logger may be nil.
func NewReconciler(js jetstream.JetStream, ns string, cfg ReconcileConfig, logger *slog.Logger) *Reconciler {
	cfg.setDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Reconciler{js: js, names: streams.NamesFor(ns), cfg: cfg, logger: logger.With("component", "reconcile")}
}

// entry is what the scans learned about one command id.
type entry struct {
	kind        string
	decisionSeq uint64 // EVENTS sequence of the issuing decision; 0: not issued in the log
	dueAt       int64  // when it could first be in OUTBOX: max(decision time, deliver-after), unix ns
	copies      int    // messages on <ns>.outbox.<kind>, re-drives from the DLQ not counted
	lastSeq     uint64 // OUTBOX sequence of the newest copy
	lastAt      int64  // its server time, unix ns
	scheduled   bool   // a pending schedule on <ns>.schedule.>
	dead        bool   // in the DLQ, not settled by an audit record
	discarded   bool   // its last DLQ audit record says discarded
	outcome     string // receipt outcome, "" without one
	toldFailed  bool   // its aggregate recorded <kind>_failed
}

// Run scans the log, OUTBOX, the DLQ and the receipts, and reports per kind
// and in total. progress, when not nil, is called as the scan advances with
// the messages read so far and an estimate of the total (which may grow
// while the scan runs: OUTBOX is read to its end).
//
// The relay's ack floor is read first: every decision at or below it had its
// commands acknowledged by OUTBOX before it was acked, so a command of such
// a decision that the later OUTBOX scan does not find is an orphan (unless
// it has an outcome, or its decision is older than OUTBOX's retention).
func (r *Reconciler) Run(ctx context.Context, progress func(done, total uint64)) (Report, error) {
	now := r.cfg.Now()
	rep := Report{Namespace: r.names.Namespace, At: now.UTC(), StuckAfter: r.cfg.StuckAfter, Kinds: map[string]Counts{}}

	cons, err := r.js.Consumer(ctx, r.names.Events, wire.RelayConsumerName)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
	case err != nil:
		return rep, fmt.Errorf("reconcile: relay consumer on %s: %w", r.names.Events, err)
	default:
		rep.RelayConsumer = true
		rep.RelayAckFloor = cons.CachedInfo().AckFloor.Stream
	}
	events, err := r.js.Stream(ctx, r.names.Events)
	if err != nil {
		return rep, fmt.Errorf("reconcile: event log %s: %w (start the node once to provision it)", r.names.Events, err)
	}
	outbox, err := r.js.Stream(ctx, r.names.Outbox)
	if err != nil {
		return rep, fmt.Errorf("reconcile: outbox %s: %w (start the node once to provision it)", r.names.Outbox, err)
	}
	dlq, err := optionalStream(ctx, r.js, r.names.DLQ)
	if err != nil {
		return rep, err
	}
	receipts, err := optionalStream(ctx, r.js, kvStream(r.names.Receipts))
	if err != nil {
		return rep, err
	}
	rep.EventsLastSeq = events.CachedInfo().State.LastSeq
	if age := outbox.CachedInfo().Config.MaxAge; age > 0 {
		rep.ExpiredBefore = now.Add(-age).UTC()
	}
	total := events.CachedInfo().State.Msgs + outbox.CachedInfo().State.Msgs
	if dlq != nil {
		total += dlq.CachedInfo().State.Msgs
	}
	if receipts != nil {
		total += receipts.CachedInfo().State.Msgs
	}

	var done uint64
	tick := func() {
		done++
		if progress != nil && done%1024 == 0 {
			progress(done, max(total, done))
		}
	}
	if progress != nil {
		progress(0, total)
	}

	s := &scan{entries: map[string]*entry{}, kinds: map[string]string{}}
	if err := r.scanEvents(ctx, s, rep.EventsLastSeq, tick, &rep); err != nil {
		return rep, err
	}
	if err := r.scanOutbox(ctx, s, tick); err != nil {
		return rep, err
	}
	if dlq != nil {
		if err := r.scanDLQ(ctx, s, tick); err != nil {
			return rep, err
		}
	}
	if receipts != nil {
		if err := r.scanReceipts(ctx, s, tick); err != nil {
			return rep, err
		}
	}
	rep.Scanned = s.scanned
	if progress != nil {
		progress(done, max(total, done))
	}
	r.classify(s, &rep, now)
	r.logger.Debug("reconciled", "issued", rep.Totals.Issued, "orphans", rep.Totals.Orphans,
		"duplicates", rep.Totals.Duplicates, "stuck", rep.Totals.Stuck, "relay_ack_floor", rep.RelayAckFloor)
	return rep, nil
}

// scan is one Run's working set.
type scan struct {
	entries map[string]*entry
	kinds   map[string]string // interned kind names: millions of entries share a few
	scanned Scanned
}

func (s *scan) kind(k string) string {
	if v, ok := s.kinds[k]; ok {
		return v
	}
	s.kinds[k] = k
	return k
}

// get returns id's entry, creating it with kind when new.
func (s *scan) get(id, kind string) *entry {
	e := s.entries[id]
	if e == nil {
		e = &entry{kind: s.kind(kind)}
		s.entries[id] = e
	}
	return e
}

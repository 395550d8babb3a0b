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
	// Checkpoint says whether a run starts from the last run's checkpoint
	// (the zero value), re-checks everything and writes a new one, or
	// neither reads nor writes one.
	Checkpoint CheckpointMode
	// CheckpointFile, when set, keeps the checkpoint in this local file
	// instead of the object store <ns>_reconcile: for a user who may not
	// write to JetStream (the operator role creates no stream of its own).
	CheckpointFile string
	// Chunk is how many EVENTS messages a run reads before it settles what
	// it can (see reconcile_chunks.go), so its memory follows the open
	// commands, not the log. Zero means 100,000; negative: one chunk.
	Chunk int
}

func (c *ReconcileConfig) setDefaults() {
	if c.StuckAfter == 0 {
		c.StuckAfter = 15 * time.Minute
	}
	if c.Batch == 0 {
		c.Batch = 1000
	}
	if c.Chunk == 0 {
		c.Chunk = DefaultReconcileChunk
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
	seqs        []uint64
	lastSeq     uint64 // OUTBOX sequence of the newest copy
	lastAt      int64  // its server time, unix ns
	scheduled   bool   // a pending schedule on <ns>.schedule.>
	schedSeq    uint64 // its OUTBOX sequence
	dead        bool   // in the DLQ, not settled by an audit record
	discarded   bool   // its last DLQ audit record says discarded
	outcome     string // receipt outcome, "" without one
	toldFailed  bool   // its aggregate recorded <kind>_failed
	report      bool   // its decision asked for the outcome to be reported
	reported    bool   // its aggregate recorded an outcome for it
	refused     string // why its aggregate refused the outcome (its receipt says)
}

// Run reconciles the namespace and reports per kind and in total.
// progress, when not nil, is called as the scans advance with the messages
// read so far and an estimate of the total.
//
// What each stream holds is bounded first, in an order that makes the
// bounds consistent: the relay's ack floor, then the last sequences of the
// receipts, the DLQ and OUTBOX, then the log's. Every decision at or below
// the ack floor had its commands acknowledged by OUTBOX before it was
// acked, so a command of such a decision that OUTBOX (up to its bound)
// does not hold is an orphan (unless it has an outcome, or its decision is
// older than OUTBOX's retention); and every command, receipt or dead letter
// read was issued by a decision the log scan reads.
//
// With a checkpoint (the default mode, after a first run), only what was
// stored after it is read, plus what it left open (see
// reconcile_checkpoint.go).
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
	receipts, err := optionalStream(ctx, r.js, wire.KVStream(r.names.Receipts))
	if err != nil {
		return rep, err
	}
	dlq, err := optionalStream(ctx, r.js, r.names.DLQ)
	if err != nil {
		return rep, err
	}
	outbox, err := r.js.Stream(ctx, r.names.Outbox)
	if err != nil {
		return rep, fmt.Errorf("reconcile: outbox %s: %w%s", r.names.Outbox, err, provisionHint(err))
	}
	events, err := r.js.Stream(ctx, r.names.Events)
	if err != nil {
		return rep, fmt.Errorf("reconcile: event log %s: %w%s", r.names.Events, err, provisionHint(err))
	}
	b := bounds{events: markOf(events), outbox: markOf(outbox), dlq: markOf(dlq), receipts: markOf(receipts)}
	rep.EventsLastSeq = b.events.Last
	if age := outbox.CachedInfo().Config.MaxAge; age > 0 {
		rep.ExpiredBefore = now.Add(-age).UTC()
	}
	if receipts != nil {
		// A command older than its receipts may have run and lost its
		// receipt: re-publishing it (--repair) could run it again.
		if age := receipts.CachedInfo().Config.MaxAge; age > 0 {
			rep.ReceiptsMaxAge = age
			if before := now.Add(-age).UTC(); rep.ExpiredBefore.IsZero() || before.After(rep.ExpiredBefore) {
				rep.ExpiredBefore = before
			}
		}
	}

	var cp *checkpoint
	switch r.cfg.Checkpoint {
	case CheckpointFull:
		rep.Checkpoint.FullBecause = "--full asked for it"
	case CheckpointOff:
		rep.Checkpoint.FullBecause = "checkpoints off"
	default:
		cp, rep.Checkpoint.FullBecause, err = r.loadCheckpoint(ctx, b, rep.ReceiptsMaxAge > 0)
		if err != nil {
			// A run without its checkpoint is slower, not wrong.
			r.logger.Warn("reconcile: checkpoint unreadable; reading everything", "error", err)
			rep.Checkpoint.FullBecause = err.Error()
		}
	}
	s, err := r.scanAll(ctx, cp, b, progress, &rep, r.chunk())
	if errors.Is(err, errTouchedClosed) {
		// Something changed a command the checkpoint (or an earlier chunk
		// of this run) had settled: a duplicate, a late outcome. Only a
		// run that keeps every command can say what.
		rep.Checkpoint.FullBecause = err.Error()
		cp = nil
		rep.Undecodable = 0
		s, err = r.scanAll(ctx, nil, b, progress, &rep, 0)
	}
	if err != nil {
		return rep, err
	}
	if cp != nil {
		rep.Checkpoint.Incremental = true
		rep.Checkpoint.From = cp.bounds().marks()
		rep.Undecodable += cp.Undecodable
		if err := r.verifyOpen(ctx, s, outbox, b); err != nil {
			return rep, err
		}
	}
	rep.Scanned = s.scanned
	closed := r.classify(s, &rep, now, cp)
	rep.Checkpoint.Open = len(s.entries)
	r.logger.Debug("reconciled", "issued", rep.Totals.Issued, "orphans", rep.Totals.Orphans,
		"duplicates", rep.Totals.Duplicates, "stuck", rep.Totals.Stuck, "relay_ack_floor", rep.RelayAckFloor,
		"incremental", rep.Checkpoint.Incremental)
	if r.cfg.Checkpoint != CheckpointOff {
		if err := r.saveCheckpoint(ctx, newCheckpoint(b, s, closed, rep.Undecodable)); err != nil {
			// The report stands; the next run reads everything again.
			r.logger.Warn("reconcile: checkpoint not saved", "error", err)
			rep.Checkpoint.SaveError = err.Error()
		} else {
			rep.Checkpoint.Saved = true
		}
	}
	return rep, nil
}

// scanAll reads each stream from the checkpoint (nil: from the beginning)
// to its bound, chunk EVENTS messages at a time (0: in one go), settling
// after each chunk what it can.
func (r *Reconciler) scanAll(ctx context.Context, cp *checkpoint, b bounds, progress func(done, total uint64), rep *Report, chunk uint64) (*scan, error) {
	s := &scan{entries: map[string]*entry{}, kinds: map[string]string{}, unsettled: map[uint64]*entry{}, closed: map[string]Counts{},
		read: r.reader(ctx)}
	var from bounds
	if cp != nil {
		s.restore(cp)
		from = cp.bounds()
	}
	if cp != nil || chunk > 0 {
		log, err := streams.Open(ctx, r.js, r.names.Namespace, streams.Config{}, nil)
		if err != nil {
			return nil, err
		}
		s.log = log
	}
	total := b.events.Last - from.events.Last + b.outbox.Last - from.outbox.Last +
		b.dlq.Last - from.dlq.Last + b.receipts.Last - from.receipts.Last
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
	for {
		to, last := b, true
		if chunk > 0 && b.events.Last > from.events.Last+chunk {
			var err error
			if to, err = r.boundsAt(ctx, from, b, from.events.Last+chunk); err != nil {
				return nil, err
			}
			last = false
		}
		if err := r.scanRange(ctx, s, from, to, tick, rep); err != nil {
			return nil, err
		}
		rep.Checkpoint.PeakHeld = max(rep.Checkpoint.PeakHeld, len(s.entries))
		if last {
			break
		}
		r.settleChunk(s, rep, to)
		from = to
	}
	if progress != nil {
		progress(done, max(total, done))
	}
	return s, nil
}

// scanRange reads each stream over (from, to].
func (r *Reconciler) scanRange(ctx context.Context, s *scan, from, to bounds, tick func(), rep *Report) error {
	if err := r.scanEvents(ctx, s, from.events.Last, to.events.Last, tick, rep); err != nil {
		return err
	}
	if err := r.scanOutbox(ctx, s, from.outbox.Last, to.outbox.Last, tick); err != nil {
		return err
	}
	if to.dlq.Last > from.dlq.Last {
		if err := r.scanDLQ(ctx, s, from.dlq.Last, to.dlq.Last, tick); err != nil {
			return err
		}
	}
	for _, e := range s.unsettled {
		e.dead = true
	}
	if to.receipts.Last > from.receipts.Last {
		if err := r.scanReceipts(ctx, s, from.receipts.Last, to.receipts.Last, tick); err != nil {
			return err
		}
	}
	return nil
}

// scan is one Run's working set.
type scan struct {
	entries map[string]*entry
	kinds   map[string]string // interned kind names: millions of entries share a few
	// unsettled are the dead letters no audit record settled yet, by DLQ
	// sequence.
	unsettled map[uint64]*entry
	// incremental: entries not in the map were settled by the checkpoint;
	// a message about one of them is errTouchedClosed.
	incremental bool
	// settledThrough is the checkpoint's last EVENTS sequence.
	settledThrough uint64
	// checked are ids touched found not to be settled ones.
	checked map[string]bool
	log     *streams.Log // to look ids up in (incremental runs, chunks)
	read    reader       // how the run reads its ranges
	scanned Scanned
	// closed counts the commands earlier chunks of this run settled.
	closed map[string]Counts
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

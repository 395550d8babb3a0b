package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/failpoint"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/telemetry"
	"github.com/esjet/esjet/internal/wire"
)

// KindConfig is how one command kind is carried out. The zero value of every
// tunable means its default.
type KindConfig struct {
	Kind    string
	Handler Handler
	// Workers is this node's pool for the kind. Zero means 4.
	Workers int
	// AckWait is the lease on a delivered command, kept alive by heartbeats
	// while the handler runs. Zero means 30s.
	AckWait time.Duration
	// Timeout cancels a handler's context. Zero means 30s. It also bounds,
	// with AckWait, how long an attempt calls again a target that is not
	// there (NATS no responders, HTTP connection refused: see
	// [Unavailable]) before it counts as a failed attempt.
	Timeout time.Duration
	// MaxAttempts bounds the attempts before the command is dead-lettered.
	// Zero means 5.
	MaxAttempts int
	// BackoffInitial and BackoffMax shape the retry delay: initial × 2^(n-1),
	// capped, ±10% jitter. Zero means 500ms and 1m.
	BackoffInitial time.Duration
	BackoffMax     time.Duration
	// Node names this worker in dead letters. Empty means the host name.
	Node string
	// Receipts group-commits the receipt writes of this node's workers
	// (streams.NewCommitter on the receipts bucket's stream). Nil: each
	// receipt is written on its own.
	Receipts *streams.Committer
	// Telemetry traces each delivery and target call and counts attempts.
	// Nil records nothing.
	Telemetry *telemetry.Telemetry
	// Control is the fleet's flow control (pauses, rate limits), shared by
	// the node's workers. Nil: the kind is never paused nor limited.
	Control *Control
	// Rate limits the calls to the target, per second, across every node
	// serving the kind (with Control). Zero means no limit.
	Rate float64
	// Burst is how many calls above Rate may start at once after a quiet
	// spell. Zero means 1.
	Burst int
	// Admit, when set, is asked before anything else whether the command
	// may run here at all (an edge hub: did the site that sent it own its
	// aggregate?). A refused command is terminated and logged: no call, no
	// receipt, no outcome, no letter (a letter or receipt under its id
	// would stand in for the genuine command of that id).
	Admit func(h nats.Header, d Delivery) error
	// ConcurrencyKey limits the calls in flight per key across every node
	// serving the kind (with Control): [ConcurrencyKeyAggregateID] for the
	// issuing aggregate's id, or a payload field path ("booking_id",
	// "booking.id"). Empty: no limit per key.
	ConcurrencyKey string
	// Concurrency is the most calls in flight for one key value. Zero
	// means 1 (with ConcurrencyKey).
	Concurrency int
	// Schema is the newest schema version of the kind's payload this
	// node's handler understands. A command of a newer one is left for a
	// worker that understands it, counting no attempt (deferral.go). Zero
	// means 1.
	Schema int
}

func (c *KindConfig) setDefaults() {
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 5
	}
	if c.BackoffInitial == 0 {
		c.BackoffInitial = 500 * time.Millisecond
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = time.Minute
	}
	if c.Node == "" {
		c.Node, _ = os.Hostname()
	}
	if c.Burst == 0 {
		c.Burst = 1
	}
	if c.Concurrency == 0 && c.ConcurrencyKey != "" {
		c.Concurrency = 1
	}
	if c.Schema == 0 {
		c.Schema = 1
	}
}

// Feedback sends a command's outcome to the aggregate that issued it, as a
// command with an idempotency key (a repeat records nothing new). An error
// wrapping [wire.ErrReportRefused] is final: the worker records it in the
// command's receipt and acks; any other is tried again.
type Feedback interface {
	Report(ctx context.Context, r wire.Report) error
}

// errStopping: the worker stopped while its target was unavailable; the
// command was not applied and goes back to the stream.
var errStopping = errors.New("the worker is stopping")

// Stats are a worker's counters. Stale counts deliveries this worker left
// alone because its lease may have passed to another worker (a pause it
// slept through) or the receiver refused its attempt as stale.
// UnreadReceipts counts receipt reads that failed before a command could
// run (each is read again: whether it was done already is not known).
//
// Paused says the worker pulls nothing because its kind is paused;
// RateWaiting counts the deliveries waiting for their rate limit's token
// now, RateWaits those that ever had to wait; KeyWaiting and KeyWaits the
// same for their concurrency key. Refused counts the commands
// KindConfig.Admit refused. Deferred counts the deliveries this worker
// left for a newer worker: their schema was newer than it understands.
type Stats struct {
	Done, Retried, Dead, Skipped, Poison, FeedbackErrors, Stale, UnreadReceipts int64
	Paused                                                                      bool
	RateWaiting, RateWaits, KeyWaiting, KeyWaits                                int64
	Refused, Deferred                                                           int64
}

// Worker runs one kind's commands on this node.
type Worker struct {
	js       jetstream.JetStream
	names    streams.Names
	cfg      KindConfig
	fb       Feedback
	logger   *slog.Logger
	receipts jetstream.KeyValue
	// control is the workers' bucket, where deferrals are counted (nil:
	// none can be).
	control jetstream.KeyValue
	// bands are the kind's priority bands, highest first (bands.go);
	// waitEnded is told when a band's idle wait ends.
	bands     []*band
	waitEnded chan struct{}
	waits     atomic.Int32 // band waits outstanding, each holding a place
	inFlight  atomic.Int64 // deliveries being handled (InFlight)

	done, retried, dead, skipped, poison, feedbackErrors, stale, unreadReceipts, refused, deferred atomic.Int64
	// Flow control: whether the pull waits for a resume; deliveries
	// waiting for their rate limit's token now, and how many ever did.
	paused                                       atomic.Bool
	rateWaiting, rateWaits, keyWaiting, keyWaits atomic.Int64
	// keys is the kind's concurrency per key (nil: none).
	keys *keyLimit

	// pause, if set (tests), runs just before the lease is confirmed for a
	// call: a stand-in for a process stopped there.
	pause func(Delivery)
	// clock, if set (tests), is the lease's clock instead of time.Now: a
	// jump forward stands in for a pause that stopped the whole process.
	clock func() time.Time
	// abandoned ends the calls in flight ([Worker.Abandon]).
	abandoned   context.Context
	abandonCall context.CancelFunc
}

// now is the time leases are reckoned in.
func (w *Worker) now() time.Time {
	if w.clock != nil {
		return w.clock()
	}
	return time.Now()
}

// ConsumerConfig is the durable consumer a kind's workers share.
func ConsumerConfig(ns string, cfg KindConfig) jetstream.ConsumerConfig {
	cfg.setDefaults()
	return jetstream.ConsumerConfig{
		Durable:       wire.WorkerConsumerName(cfg.Kind),
		Description:   "esjet workers for " + cfg.Kind,
		FilterSubject: wire.CommandSubject(ns, cfg.Kind),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		// The worker counts attempts itself and dead-letters; the server
		// never drops a command silently.
		MaxDeliver:    -1,
		MaxAckPending: 10_000,
	}
}

// NewWorker creates (or updates) the kind's durable consumer on OUTBOX.
// logger may be nil.
func NewWorker(ctx context.Context, js jetstream.JetStream, ns string, cfg KindConfig, fb Feedback, logger *slog.Logger) (*Worker, error) {
	cfg.setDefaults()
	if err := wire.ValidateToken("command kind", cfg.Kind); err != nil {
		return nil, err
	}
	if cfg.Handler == nil {
		return nil, fmt.Errorf("worker %s: no handler", cfg.Kind)
	}
	if err := cfg.validateKey(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	names := streams.NamesFor(ns)
	if r := cfg.Receipts; r != nil && r.Stream() != wire.KVStream(names.Receipts) {
		// Its reads would look in another bucket and find no receipt.
		return nil, fmt.Errorf("worker %s: the receipts committer writes %s, not namespace %s's KV_%s", cfg.Kind, r.Stream(), ns, names.Receipts)
	}
	var bands []*band
	for _, p := range wire.Priorities {
		var cons jetstream.Consumer
		err := streams.Patiently(ctx, func(ctx context.Context) (err error) {
			cons, err = js.CreateOrUpdateConsumer(ctx, names.Outbox, BandConsumerConfig(ns, cfg, p))
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("worker %s: consumer %s on %s: %w", cfg.Kind, wire.BandConsumerName(cfg.Kind, p), names.Outbox, err)
		}
		bands = append(bands, &band{priority: p, cons: cons, weight: bandWeights[p]})
	}
	kv, err := streams.BindBucket(ctx, js, names.Receipts)
	if err != nil {
		return nil, fmt.Errorf("worker %s: receipts bucket: %w", cfg.Kind, err)
	}
	w := &Worker{js: js, names: names, cfg: cfg, fb: fb, bands: bands, waitEnded: make(chan struct{}, 1), receipts: kv,
		logger: logger.With("component", "worker", "consumer", wire.WorkerConsumerName(cfg.Kind))}
	w.abandoned, w.abandonCall = context.WithCancel(context.Background())
	if cfg.ConcurrencyKey != "" {
		w.keys = newKeyLimit(cfg, js, names.Workers)
	}
	if cfg.Control != nil {
		w.control = cfg.Control.kv
	} else if w.control, err = streams.BindBucket(ctx, js, names.Workers); err != nil {
		return nil, fmt.Errorf("worker %s: workers' control bucket: %w", cfg.Kind, err)
	}
	return w, nil
}

// validateKey checks the concurrency per key settings.
func (c *KindConfig) validateKey() error {
	switch {
	case c.Concurrency < 0:
		return fmt.Errorf("worker %s: concurrency %d: use 1 or more calls in flight per key", c.Kind, c.Concurrency)
	case c.ConcurrencyKey == "" && c.Concurrency > 0:
		return fmt.Errorf("worker %s: concurrency %d needs a concurrency key (aggregate_id or a payload field)", c.Kind, c.Concurrency)
	case c.ConcurrencyKey == "":
		return nil
	case c.Control == nil:
		return fmt.Errorf("worker %s: concurrency key %q needs the fleet's flow control (KV workers bucket); none was given", c.Kind, c.ConcurrencyKey)
	}
	for name := range strings.SplitSeq(c.ConcurrencyKey, ".") {
		if err := wire.ValidateToken("concurrency key field", name); err != nil {
			return fmt.Errorf("worker %s: concurrency key %q: %w", c.Kind, c.ConcurrencyKey, err)
		}
	}
	return nil
}

// Stats returns the worker's counters.
func (w *Worker) Stats() Stats {
	return Stats{Done: w.done.Load(), Retried: w.retried.Load(), Dead: w.dead.Load(), Skipped: w.skipped.Load(),
		Poison: w.poison.Load(), FeedbackErrors: w.feedbackErrors.Load(), Stale: w.stale.Load(), UnreadReceipts: w.unreadReceipts.Load(),
		Paused: w.paused.Load(), RateWaiting: w.rateWaiting.Load(), RateWaits: w.rateWaits.Load(),
		KeyWaiting: w.keyWaiting.Load(), KeyWaits: w.keyWaits.Load(), Refused: w.refused.Load(), Deferred: w.deferred.Load()}
}

// handle runs one delivery, held under lease l, to its outcome. stop is
// closed when the worker is stopping: a call in flight finishes, but a
// target that is unavailable is not called again (see attempt). The
// delivery holds place in the pool until its call is over; what follows
// the call (receipt, report, ack) moves to the records (see place).
func (w *Worker) handle(ctx context.Context, stop <-chan struct{}, m jetstream.Msg, l *lease, p *place) {
	meta, err := m.Metadata()
	if err != nil {
		w.logger.Error("message without metadata", "subject", m.Subject(), "error", err)
		_ = m.Term()
		return
	}
	raw := &nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}
	if raw.Header == nil {
		raw.Header = nats.Header{}
	}
	d, derr := deliveryFrom(raw, int(meta.NumDelivered), meta.Sequence.Consumer)
	ctx, span := w.cfg.Telemetry.StartDelivery(ctx, w.cfg.Kind, raw.Header)
	defer span.End(nil)
	log := w.logger.With("command_id", d.CommandID, "decision_id", d.DecisionID, "trace_id", span.TraceID(),
		"seq", meta.Sequence.Stream, "attempt", d.Attempt, "fence", d.Fence)
	if derr != nil {
		w.poison.Add(1)
		w.deadLetter(ctx, log, m, raw, meta.Sequence.Stream, d, derr)
		return
	}
	if w.cfg.Admit != nil {
		if err := w.cfg.Admit(raw.Header, d); err != nil {
			w.refused.Add(1)
			log.Error("command refused: not run, terminated", "kind", d.Kind, "aggregate_type", d.AggregateType, "aggregate_id", d.AggregateID, "error", err)
			_ = m.Term()
			return
		}
	}
	if d.Schema > w.cfg.Schema {
		// Written by a newer build for newer workers: never run here.
		w.deferNewer(ctx, log, m, d)
		return
	}
	if n, hb, err := w.uncounted(ctx, d); err != nil {
		// How many of its deliveries were left for newer workers or handed
		// back at a stop is not known: counting them all as attempts could
		// dead-letter it.
		log.Warn("deferral count not readable; giving the command back", "error", err)
		_ = m.NakWithDelay(w.backoff(1))
		return
	} else if n+hb > 0 {
		d.Deferred, d.HandedBack, d.Attempt = n, hb, max(d.Attempt-n-hb, 1)
		log = log.With("deferred", n, "handed_back", hb, "attempt_counted", d.Attempt)
	}
	rc, found, ok := w.readReceipt(ctx, stop, log, m, raw, meta.Sequence.Stream, d, l)
	if !ok {
		return
	}
	if found && rc.Outcome == wire.OutcomeDone {
		// Done already (a redelivery after a lost ack, or a duplicate
		// copy): do not run it again; make sure its outcome was reported.
		w.skipped.Add(1)
		if !w.report(ctx, log, d, true, rc.Result, "") {
			_ = m.NakWithDelay(w.backoff(d.Attempt))
			return
		}
		w.ackFolded(log, m)
		w.settleDeferral(ctx, log, d)
		return
	}
	if found && rc.Outcome == wire.OutcomeFailed {
		// Failed for good already (a redelivery after a crash mid-way
		// through dead-lettering, a duplicate copy, all of OUTBOX again
		// after a restore): its aggregate may have been told, so it never
		// runs again (a retry from the DLQ clears this receipt). The same
		// reason and count as the first time: the report must be
		// byte-identical to one the aggregate may have taken.
		d.Attempt = max(rc.Attempts, 1)
		if rc.DeadLetter == 0 {
			w.deadLetter(ctx, log, m, raw, meta.Sequence.Stream, d, errors.New(rc.LastError))
			return
		}
		// Its letter is written (and may be settled since): no other.
		w.skipped.Add(1)
		log.Info("failed already and dead-lettered; not run again", "dlq_seq", rc.DeadLetter)
		w.report(ctx, log, d, false, nil, rc.LastError)
		_ = m.TermWithReason(rc.LastError)
		w.settleDeferral(ctx, log, d)
		return
	}
	if d.Attempt > w.cfg.MaxAttempts {
		// Redelivered past the limit without an outcome (workers died
		// mid-handler): give up rather than loop.
		w.deadLetter(ctx, log, m, raw, meta.Sequence.Stream, d, fmt.Errorf("%d deliveries without an outcome", d.Attempt-1))
		return
	}

	var slot *keySlot
	if w.keys != nil {
		value, err := w.keys.valueOf(d)
		if err != nil {
			// No call can be limited by a key it does not have; a fixed
			// payload or configuration and a re-drive run it.
			w.deadLetter(ctx, log, m, raw, meta.Sequence.Stream, d, err)
			return
		}
		if slot = w.waitKey(ctx, stop, log, m, l, p, d, value); slot == nil {
			return
		}
		defer w.releaseKey(ctx, log, slot)
	}
	if !w.waitRate(ctx, stop, log, m, l, d) {
		return
	}
	if slot != nil {
		if err := slot.fresh(ctx, w.cfg.Timeout); err != nil {
			// Not sure the key is ours for as long as the call may run:
			// do not call; the next delivery takes the key again.
			log.Warn("concurrency key not renewed before the call; giving the command back", "error", err)
			_ = m.NakWithDelay(w.backoff(d.Attempt))
			return
		}
	}
	if w.pause != nil {
		w.pause(d)
	}
	result, herr := w.tracedAttempt(ctx, stop, log, m, d, l)
	if slot != nil {
		w.releaseKey(ctx, log, slot) // the call is over: the next of its key may start
	}
	p.handOff()
	failpoint.Hit(failpoint.WorkerAfterCall)
	if errors.Is(herr, errStopping) {
		// Nothing was applied: give it back now, for another node's
		// workers (or this node's after its restart), rather than hold the
		// shutdown for the rest of the attempt's timeout.
		log.Info("stopping while the target is unavailable; handing the command back", "error", herr)
		w.handBack(ctx, log, m, d)
		return
	}
	if herr == nil {
		// Report what the receipt holds: if another worker finished first
		// (this one lost its lease), its result is the one on record, and
		// every report of the command stays identical.
		rc, stored, held := w.saveReceipt(ctx, log, wire.Receipt{CommandID: d.CommandID, Kind: d.Kind, Outcome: wire.OutcomeDone,
			Attempts: d.Attempt, ResultDigest: digest(result), Result: result, At: time.Now().UTC()})
		if held {
			// Another delivery's receipt is on record and could not be
			// read: its result, not this call's, is the one to report. The
			// next delivery reads it and reports it.
			_ = m.NakWithDelay(w.backoff(d.Attempt))
			return
		}
		failpoint.Hit(failpoint.WorkerAfterReceipt)
		if !w.report(ctx, log, d, true, rc.Result, "") {
			_ = m.NakWithDelay(w.backoff(d.Attempt))
			return
		}
		w.done.Add(1)
		failpoint.Hit(failpoint.WorkerBeforeAck)
		if stored {
			w.ackFolded(log, m)
		} else {
			w.ack(ctx, log, m) // no receipt: a redelivery would run it again
		}
		w.settleDeferral(ctx, log, d)
		return
	}
	verdict, after := classify(herr)
	if errors.Is(herr, errLeaseLost) || verdict == stale {
		// Another worker holds the command now (or will once the server
		// redelivers it): no ack, no nak — a nak from a stale holder would
		// redeliver the command at once, under the new holder's feet.
		w.stale.Add(1)
		log.Warn("leaving the command to another worker: this one's lease may be gone", "error", herr)
		return
	}
	if verdict != terminal && d.Attempt < w.cfg.MaxAttempts {
		delay := after
		if delay == 0 {
			delay = w.backoff(d.Attempt)
		}
		w.retried.Add(1)
		log.Info("retrying", "error", herr, "delay", delay)
		_ = m.NakWithDelay(delay)
		return
	}
	w.deadLetter(ctx, log, m, raw, meta.Sequence.Stream, d, herr)
}

package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/failpoint"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/telemetry"
	"github.com/esjet/esjet/internal/wire"
)

// RelayStats are counters since the relay started.
type RelayStats struct {
	Decisions   int64 // decisions acked
	Commands    int64 // commands published (first time)
	Duplicates  int64 // commands OUTBOX already had (a redelivery after a crash): not published again, or dropped by its window
	Scheduled   int64 // delayed commands published as schedules
	Failures    int64 // publish failures (the decisions are redelivered)
	Undecodable int64 // messages on EVENTS that are not esjet decisions (skipped)
	TooNew      int64 // tries that stopped at a decision a newer build wrote (never skipped)
	// Scanned: OUTBOX messages read to find what redelivered decisions had
	// already published (zero while no decision comes back).
	Scanned int64
	LastSeq uint64 // EVENTS sequence of the last decision acked
	// AtomicBatches: atomic batches of commands OUTBOX stored (see
	// RelayConfig.AtomicMin); their commands count in Commands.
	AtomicBatches int64
	// PastReceipts: commands not published because their decision is
	// older than RelayConfig.ReceiptsMaxAge.
	PastReceipts int64
}

// Relay moves recorded commands from EVENTS to OUTBOX. Run it on every
// node: one is active (pinned), the others stand by and take over within
// PinnedTTL when it stops pulling.
type Relay struct {
	js     jetstream.JetStream // own context: its async publish window is the relay's
	names  streams.Names
	cfg    RelayConfig
	logger *slog.Logger
	cons   jetstream.Consumer

	decisions, commands, duplicates, scheduled, failures, undecodable, scanned, batches, pastReceipts atomic.Int64
	lastSeq                                                                                           atomic.Uint64
	tooNew                                                                                            atomic.Int64
	tooNewSeq                                                                                         atomic.Uint64 // the last one logged
	// stoppedNewer: the last publish stopped before a decision a newer
	// build wrote, everything before it landed (the Run goroutine's).
	stoppedNewer bool

	// Exactly once without a time limit (redelivery.go): decisions stored
	// before this time (unix ns) may have been relayed before; OUTBOX's
	// duplicate window; the index and scanner are the Run goroutine's.
	suspectBefore atomic.Int64
	dedupWindow   time.Duration
	index         *outboxIndex
	scanner       *streams.Scanner
}

// NewRelay creates (or updates) the relay's durable consumer on the
// namespace's EVENTS stream. logger may be nil.
func NewRelay(ctx context.Context, js jetstream.JetStream, ns string, cfg RelayConfig, logger *slog.Logger) (*Relay, error) {
	cfg.setDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	names := streams.NamesFor(ns)
	own, err := jetstream.New(js.Conn(), jetstream.WithPublishAsyncMaxPending(cfg.Batch*16),
		jetstream.WithPublishAsyncTimeout(cfg.AckWait/2))
	if err != nil {
		return nil, err
	}
	cons, err := relayConsumer(ctx, js, names, cfg, logger)
	if err != nil {
		return nil, fmt.Errorf("relay consumer on %s: %w", names.Events, err)
	}
	var window time.Duration // unknown: extend the index at every lookup
	if st, err := js.Stream(ctx, names.Outbox); err == nil {
		window = st.CachedInfo().Config.Duplicates
	}
	r := &Relay{js: own, names: names, cfg: cfg, logger: logger.With("component", "relay", "consumer", ConsumerName), cons: cons,
		dedupWindow: window}
	return r, nil
}

// relayConsumer creates or updates the relay's durable consumer. A consumer
// left by an earlier esjet with cumulative acks (its ack policy cannot be
// changed in place) is replaced by one that starts right after the old
// one's ack floor: nothing relayed is relayed again, nothing pending is
// skipped.
func relayConsumer(ctx context.Context, js jetstream.JetStream, names streams.Names, cfg RelayConfig, logger *slog.Logger) (jetstream.Consumer, error) {
	want := RelayConsumerConfig(names, cfg)
	// Each request is asked again while JetStream's answer is transient
	// (nodes started together on a new cluster), one at a time: a retry
	// never repeats the delete below, nor loses the start it computed.
	var cons jetstream.Consumer
	create := func(ctx context.Context) (err error) {
		cons, err = js.CreateOrUpdateConsumer(ctx, names.Events, want)
		return err
	}
	var old jetstream.Consumer
	err := streams.Patiently(ctx, func(ctx context.Context) (err error) {
		old, err = js.Consumer(ctx, names.Events, ConsumerName)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if old != nil {
		info, ierr := old.Info(ctx)
		if ierr == nil && info.Config.AckPolicy != want.AckPolicy {
			want.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
			want.OptStartSeq = info.AckFloor.Stream + 1
			if err := js.DeleteConsumer(ctx, names.Events, ConsumerName); err != nil {
				return nil, err
			}
			logger.Info("relay consumer replaced to change its ack policy", "start_seq", want.OptStartSeq)
		}
	}
	return cons, streams.Patiently(ctx, create)
}

// Stats returns the relay's counters.
func (r *Relay) Stats() RelayStats {
	return RelayStats{
		Decisions: r.decisions.Load(), Commands: r.commands.Load(), Duplicates: r.duplicates.Load(),
		Scheduled: r.scheduled.Load(), PastReceipts: r.pastReceipts.Load(), Failures: r.failures.Load(), Undecodable: r.undecodable.Load(), TooNew: r.tooNew.Load(), Scanned: r.scanned.Load(),
		LastSeq: r.lastSeq.Load(), AtomicBatches: r.batches.Load(),
	}
}

// relay publishes the commands of msgs (in order), waits for OUTBOX, and acks
// the decisions. If some commands did not land, it acks the decisions
// before the first such one and then tries again from it, holding the
// lease, until they land or ctx ends: it never acks past a decision whose
// commands are not in OUTBOX, so commands reach OUTBOX in decision order.
// It returns true when it stopped before a decision a newer build wrote,
// leaving that one and the rest unacknowledged: the relay stands down (Run).
func (r *Relay) relay(ctx context.Context, conf *confirmer, msgs []jetstream.Msg) (standDown bool) {
	failpoint.Hit(failpoint.RelayBeforePublish)
	backoff := 100 * time.Millisecond
	check := recheckSuspect
	for len(msgs) > 0 {
		r.stoppedNewer = false
		failedAt := r.publish(ctx, msgs, check)
		check = recheckAll // what did not land may have landed in part
		failpoint.Hit(failpoint.RelayAfterPublish)
		if failedAt > 0 {
			r.ackThrough(conf, msgs[:failedAt])
		}
		msgs = msgs[failedAt:]
		if len(msgs) == 0 {
			return false
		}
		if r.stoppedNewer {
			// Everything before it landed and is acked. Retrying here would
			// keep the pin, and no relay of a newer build could take over;
			// a nak would have the server hand it straight back to this
			// relay while it still pulls (and one that lands after the
			// pull stopped is lost until AckWait, while the decisions after
			// it go out). So it and the rest are left unacknowledged: they
			// come back after AckWait to whichever relay is active then.
			return true
		}
		for _, m := range msgs {
			_ = m.InProgress()
		}
		select {
		case <-ctx.Done():
			// Shutting down: hand them back; the next relay starts here.
			for _, m := range msgs {
				_ = m.Nak()
			}
			return false
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, r.retryMax())
	}
	return false
}

// retryMax is the longest pause between two tries of a batch. While OUTBOX
// has no leader (an R3 election: 4–15 s measured under load) every try is
// answered at once with "no response from stream", so a short pause costs
// little, and it bounds how late the relay notices the new leader: a 5 s
// cap made it up to 5 s late on top of the election. It stays below
// AckWait, so the batch's leases (renewed before each pause) hold.
func (r *Relay) retryMax() time.Duration { return min(time.Second, r.cfg.AckWait/2) }

// count records one command OUTBOX took.
func (r *Relay) count(ack *jetstream.PubAck, scheduled bool) {
	switch {
	case ack.Duplicate:
		r.duplicates.Add(1)
	case scheduled:
		r.scheduled.Add(1)
	default:
		r.commands.Add(1)
	}
}

// ackThrough acks the relayed decisions: each one but the last, whose
// confirmation conf awaits without holding up the next batch (confirm.go).
func (r *Relay) ackThrough(conf *confirmer, msgs []jetstream.Msg) {
	for _, m := range msgs[:len(msgs)-1] {
		_ = m.Ack()
	}
	conf.push(len(msgs), msgs[len(msgs)-1])
}

// publish sends the commands of msgs and waits for OUTBOX's answers. It
// returns the index of the first decision whose commands did not all land
// (len(msgs) when all did). Decisions that check selects are first looked
// up in OUTBOX (see redelivery.go): only their commands it does not hold
// are sent.
func (r *Relay) publish(ctx context.Context, msgs []jetstream.Msg, check recheck) int {
	type decision struct {
		rec     streams.Record
		ok      bool // an esjet decision with metadata
		checked bool // look its commands up in OUTBOX first
	}
	decs := make([]decision, len(msgs))
	var oldest time.Time
	firstChecked := -1
	stopAt := len(msgs)
	for i, m := range msgs {
		meta, err := m.Metadata()
		if err != nil {
			r.logger.Error("relay: message without metadata", "subject", m.Subject(), "error", err)
			continue
		}
		d, err := streams.Decode(m.Data())
		if r.stopsAt(m, meta.Sequence.Stream, err) {
			stopAt = i
			r.stoppedNewer = true
			break
		}
		if err != nil {
			r.undecodable.Add(1)
			r.logger.Error("relay: not an esjet decision; skipped", "subject", m.Subject(), "seq", meta.Sequence.Stream, "error", err)
			continue
		}
		decs[i] = decision{rec: streams.Record{Decision: d, Seq: meta.Sequence.Stream, Subject: m.Subject(), Stored: meta.Timestamp}, ok: true}
		if len(d.Commands) > 0 && (check == recheckAll || r.suspect(meta.Timestamp, meta.NumDelivered)) {
			decs[i].checked = true
			if firstChecked < 0 || meta.Timestamp.Before(oldest) {
				oldest = meta.Timestamp
			}
			if firstChecked < 0 {
				firstChecked = i
			}
		}
	}
	var have map[string]struct{}
	failedAt := stopAt
	if firstChecked < 0 {
		r.forget()
	} else {
		var err error
		if have, err = r.inOutbox(ctx, oldest); err != nil {
			r.failures.Add(1)
			r.logger.Warn("relay: cannot tell which commands of redelivered decisions OUTBOX holds; trying again", "error", err)
			failedAt = firstChecked
		}
	}

	now := r.cfg.Now()
	var out []outgoing
	for i := range decs {
		if i >= failedAt {
			break // everything from the failure on is sent again anyway
		}
		dec := decs[i]
		if !dec.ok {
			continue
		}
		if r.pastHorizon(dec.rec, now) {
			continue
		}
		for _, c := range dec.rec.Commands {
			if _, stored := have[c.ID]; stored && dec.checked {
				r.duplicates.Add(1) // published before the decision came back
				continue
			}
			cm := wire.EncodeCommand(r.names.Namespace, dec.rec, c, now)
			r.cfg.Telemetry.Relayed(cm, dec.rec.Stored)
			out = append(out, outgoing{msg: i, cm: cm, sched: wire.IsSchedule(cm)})
		}
	}
	return min(failedAt, r.send(ctx, out))
}

// pastHorizon reports (and logs and counts) a decision older than the
// receipts' max age: whether its commands ran cannot be told any more —
// their receipts may have expired with their OUTBOX copies — so they are
// not published, where a run would otherwise be repeated.
func (r *Relay) pastHorizon(rec streams.Record, now time.Time) bool {
	if r.cfg.ReceiptsMaxAge <= 0 || len(rec.Commands) == 0 || !rec.DecidedAt().Before(now.Add(-r.cfg.ReceiptsMaxAge)) {
		return false
	}
	r.pastReceipts.Add(int64(len(rec.Commands)))
	ids := make([]string, len(rec.Commands))
	for i, c := range rec.Commands {
		ids[i] = c.ID
	}
	r.logger.Warn("relay: decision older than streams.receipts_max_age; its commands are not published (they may have run, and their receipts expired): esjet reconcile counts them expired",
		"seq", rec.Seq, "decided", rec.DecidedAt(), "receipts_max_age", r.cfg.ReceiptsMaxAge, "command_ids", ids)
	return true
}

// outgoing is one command to publish: its decision's index in the batch.
type outgoing struct {
	msg   int
	cm    *nats.Msg
	sched bool
}

// send publishes out in order and returns the index of the first decision
// one of whose commands did not land (maxInt when all did). With AtomicMin
// set and enough commands, they go as atomic batches of at most
// atomicMax, one after another; a batch OUTBOX refuses (a command it
// already holds: 10201) is sent again command by command, whose duplicates
// OUTBOX then drops one by one.
func (r *Relay) send(ctx context.Context, out []outgoing) int {
	var plain []outgoing
	for _, o := range out {
		if o.sched {
			plain = append(plain, o)
		}
	}
	if r.cfg.AtomicMin == 0 || len(out)-len(plain) < r.cfg.AtomicMin {
		return r.sendPlain(ctx, out)
	}
	// Delayed commands first, on their own (a schedule is a roll-up);
	// then the rest, in order, up to the first decision that failed.
	failedAt := r.sendPlain(ctx, plain)
	var chunk []outgoing
	flush := func() bool {
		if len(chunk) == 0 {
			return true
		}
		if f := r.sendAtomic(ctx, chunk); f != math.MaxInt {
			failedAt = min(failedAt, f)
			return false
		}
		chunk = chunk[:0]
		return true
	}
	for _, o := range out {
		if o.msg >= failedAt {
			break
		}
		if o.sched {
			continue
		}
		chunk = append(chunk, o)
		if len(chunk) == atomicMax && !flush() {
			return failedAt
		}
	}
	flush()
	return failedAt
}

// atomicMax caps an atomic batch of commands (JetStream allows 1,000).
const atomicMax = 512

// sendAtomic publishes chunk as one atomic batch; see send.
func (r *Relay) sendAtomic(ctx context.Context, chunk []outgoing) int {
	msgs := make([]*nats.Msg, len(chunk))
	for i, o := range chunk {
		msgs[i] = o.cm
	}
	bctx, cancel := context.WithTimeout(ctx, r.cfg.AckWait/2)
	_, err := streams.PublishAtomic(bctx, r.js.Conn(), msgs)
	cancel()
	switch {
	case err == nil:
		r.commands.Add(int64(len(chunk)))
		r.batches.Add(1)
		return math.MaxInt
	case streams.IsBatchDuplicate(err):
		// Some command is in OUTBOX already: each on its own, so OUTBOX
		// drops just the duplicates.
		return r.sendPlain(ctx, chunk)
	default:
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) {
			r.logger.Warn("relay: OUTBOX refused an atomic batch; publishing its commands one by one", "commands", len(chunk), "error", err)
			return r.sendPlain(ctx, chunk)
		}
		// A timeout or a lost connection: the batch may have landed.
		// Its decisions are tried again, and their commands looked up
		// in OUTBOX first.
		r.failures.Add(1)
		r.logger.Warn("relay: atomic batch to OUTBOX unanswered; trying again from its first decision", "commands", len(chunk), "error", err)
		return chunk[0].msg
	}
}

// sendPlain publishes out as concurrent plain publishes and waits for
// OUTBOX's answers; see send.
func (r *Relay) sendPlain(ctx context.Context, out []outgoing) int {
	type sent struct {
		msg   int // index in msgs
		fut   jetstream.PubAckFuture
		sched bool
	}
	failedAt := math.MaxInt
	var futs []sent
	for _, o := range out {
		if o.msg >= failedAt {
			break
		}
		fut, err := r.js.PublishMsgAsync(o.cm)
		if err != nil {
			telemetry.CommandLogger(r.logger, o.cm.Header).Warn("relay: publish", "error", err)
			failedAt = o.msg
			break
		}
		futs = append(futs, sent{msg: o.msg, fut: fut, sched: o.sched})
	}
	// One deadline for the whole batch; once it has passed, every publish
	// still unanswered counts as failed (and the async timeout above makes
	// sure each future does end).
	timeout := time.NewTimer(r.cfg.AckWait / 2)
	defer timeout.Stop()
	expired := false
	for _, s := range futs {
		if expired {
			select {
			case ack := <-s.fut.Ok():
				r.count(ack, s.sched)
			default:
				r.failures.Add(1)
				failedAt = min(failedAt, s.msg)
			}
			continue
		}
		select {
		case ack := <-s.fut.Ok():
			r.count(ack, s.sched)
		case err := <-s.fut.Err():
			r.failures.Add(1)
			telemetry.CommandLogger(r.logger, s.fut.Msg().Header).Warn("relay: OUTBOX refused a command; trying again from its decision", "error", err)
			failedAt = min(failedAt, s.msg)
		case <-timeout.C:
			expired = true
			r.failures.Add(1)
			failedAt = min(failedAt, s.msg)
		}
	}
	return failedAt
}

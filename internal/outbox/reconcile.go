package outbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
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
	dead        bool   // in the DLQ
	discarded   bool   // its last DLQ audit record says discarded
	outcome     string // receipt outcome, "" without one
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

	cons, err := r.js.Consumer(ctx, r.names.Events, ConsumerName)
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

func (r *Reconciler) scanEvents(ctx context.Context, s *scan, to uint64, tick func(), rep *Report) error {
	if to == 0 {
		return nil
	}
	sc := streams.NewScanner(r.js, r.names.Events, r.cfg.Batch)
	defer sc.Close()
	_, err := sc.Scan(ctx, streams.ScanRange{Filter: r.names.EventsFilter(), To: to}, func(m *jetstream.RawStreamMsg) error {
		tick()
		s.scanned.Events++
		rec, err := streams.DecodeRecord(m)
		if err != nil {
			// The relay skips these too: they carry no commands.
			rep.Undecodable++
			r.logger.Warn("reconcile: not an esjet decision; skipped", "stream", r.names.Events, "seq", m.Sequence, "error", err)
			return nil
		}
		for _, c := range rec.Commands {
			e := s.get(c.ID, c.Kind)
			if e.decisionSeq == 0 {
				e.decisionSeq, e.dueAt = rec.Seq, rec.Stored.UnixNano()
				if c.DeliverAfter.After(rec.Stored) {
					// A fired schedule is stored at its time and ages out
					// from then; a schedule that aged out before firing is
					// lost, not expired.
					e.dueAt = c.DeliverAfter.UnixNano()
				}
			}
		}
		return nil
	})
	return err
}

func (r *Reconciler) scanOutbox(ctx context.Context, s *scan, tick func()) error {
	sc := streams.NewScanner(r.js, r.names.Outbox, r.cfg.Batch)
	defer sc.Close()
	outboxPrefix, schedulePrefix := r.names.Namespace+".outbox.", r.names.Namespace+".schedule."
	_, err := sc.Scan(ctx, streams.ScanRange{}, func(m *jetstream.RawStreamMsg) error {
		tick()
		s.scanned.Outbox++
		id := m.Header.Get(HeaderCommandID)
		if id == "" {
			id = m.Header.Get(jetstream.MsgIDHeader) // a producer outside esjet
		}
		switch {
		case id == "":
			s.scanned.Unidentified++
		case strings.HasPrefix(m.Subject, outboxPrefix):
			e := s.get(id, m.Subject[len(outboxPrefix):])
			// A re-drive from the DLQ is a second copy by design, not a
			// duplicate: it only counts when the relay's copy is gone.
			if !IsRedrive(id, m.Header.Get(jetstream.MsgIDHeader)) || e.copies == 0 {
				e.copies++
			}
			e.lastSeq, e.lastAt = m.Sequence, m.Time.UnixNano()
		case strings.HasPrefix(m.Subject, schedulePrefix):
			kind := m.Header.Get(HeaderCommandKind)
			if kind == "" {
				kind, _, _ = strings.Cut(m.Subject[len(schedulePrefix):], ".")
			}
			s.get(id, kind).scheduled = true
		}
		return nil
	})
	return err
}

func (r *Reconciler) scanDLQ(ctx context.Context, s *scan, tick func()) error {
	sc := streams.NewScanner(r.js, r.names.DLQ, r.cfg.Batch)
	defer sc.Close()
	prefix, auditPrefix := r.names.Namespace+".dlq.", r.names.Namespace+".dlq.audit."
	_, err := sc.Scan(ctx, streams.ScanRange{Filter: r.names.DLQFilter()}, func(m *jetstream.RawStreamMsg) error {
		tick()
		s.scanned.DLQ++
		id := m.Header.Get(HeaderCommandID)
		if id == "" {
			s.scanned.Unidentified++
			return nil
		}
		if kind, ok := strings.CutPrefix(m.Subject, auditPrefix); ok {
			// Stream order: the last action on the command wins.
			s.get(id, kind).discarded = m.Header.Get(HeaderDLQAction) == AuditDiscarded
			return nil
		}
		s.get(id, strings.TrimPrefix(m.Subject, prefix)).dead = true
		return nil
	})
	return err
}

func (r *Reconciler) scanReceipts(ctx context.Context, s *scan, tick func()) error {
	sc := streams.NewScanner(r.js, kvStream(r.names.Receipts), r.cfg.Batch)
	defer sc.Close()
	prefix := "$KV." + r.names.Receipts + "."
	_, err := sc.Scan(ctx, streams.ScanRange{Filter: prefix + ">"}, func(m *jetstream.RawStreamMsg) error {
		tick()
		s.scanned.Receipts++
		key := strings.TrimPrefix(m.Subject, prefix)
		if op := m.Header.Get(kvOperationHeader); op == "DEL" || op == "PURGE" {
			if e := s.entries[commandIDFromKey(key)]; e != nil {
				e.outcome = ""
			}
			return nil
		}
		var rc Receipt
		if err := json.Unmarshal(m.Data, &rc); err != nil {
			r.logger.Warn("reconcile: unreadable receipt; skipped", "key", key, "error", err)
			return nil
		}
		id := rc.CommandID
		if id == "" {
			id = commandIDFromKey(key)
		}
		e := s.get(id, rc.Kind)
		e.outcome = rc.Outcome
		if e.outcome == "" {
			e.outcome = "unknown"
		}
		return nil
	})
	return err
}

// classify turns the entries into the report's counts and lists.
func (r *Reconciler) classify(s *scan, rep *Report, now time.Time) {
	stuckBefore := now.Add(-r.cfg.StuckAfter).UnixNano()
	var expiredBefore int64
	if !rep.ExpiredBefore.IsZero() {
		expiredBefore = rep.ExpiredBefore.UnixNano()
	}
	rep.Orphans, rep.Duplicates, rep.Stuck = []Orphan{}, []Duplicate{}, []Stuck{}
	for id, e := range s.entries {
		c := rep.Kinds[e.kind]
		issued := e.decisionSeq > 0
		inOutbox := e.copies > 0 || e.scheduled
		if issued {
			c.Issued++
			if e.decisionSeq > rep.RelayAckFloor {
				c.NotYetRelayed++
			}
		}
		if inOutbox {
			c.InOutbox++
		}
		if e.scheduled {
			c.Scheduled++
		}
		switch e.outcome {
		case "":
		case OutcomeDone:
			c.Completed++
		default:
			c.Failed++
		}
		if e.dead {
			c.Dead++
		}
		discarded := e.discarded && !e.dead // still dead: the discard did not finish
		if discarded {
			c.Discarded++
		}
		if e.copies > 1 {
			c.Duplicates++
			rep.Duplicates = append(rep.Duplicates, Duplicate{ID: id, Kind: e.kind, Count: e.copies})
		}
		settled := e.outcome != "" || e.dead || discarded
		if e.copies > 0 && !settled {
			c.InFlight++
			if e.lastAt < stuckBefore {
				c.Stuck++
				rep.Stuck = append(rep.Stuck, Stuck{ID: id, Kind: e.kind, Seq: e.lastSeq, Since: time.Unix(0, e.lastAt).UTC()})
			}
		}
		if issued && !inOutbox && !settled && e.decisionSeq <= rep.RelayAckFloor {
			if e.dueAt < expiredBefore {
				c.Expired++
			} else {
				c.Orphans++
				rep.Orphans = append(rep.Orphans, Orphan{ID: id, Kind: e.kind, DecisionSeq: e.decisionSeq})
			}
		}
		rep.Kinds[e.kind] = c
	}
	for _, c := range rep.Kinds {
		rep.Totals.add(c)
	}
	slices.SortFunc(rep.Orphans, func(a, b Orphan) int {
		return cmp.Or(cmp.Compare(a.DecisionSeq, b.DecisionSeq), strings.Compare(a.ID, b.ID))
	})
	slices.SortFunc(rep.Duplicates, func(a, b Duplicate) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(rep.Stuck, func(a, b Stuck) int {
		return cmp.Or(a.Since.Compare(b.Since), strings.Compare(a.ID, b.ID))
	})
}

// KindNames returns the report's kinds, sorted.
func (r Report) KindNames() []string { return slices.Sorted(maps.Keys(r.Kinds)) }

// kvStream is the stream behind a KV bucket.
func kvStream(bucket string) string { return "KV_" + bucket }

// kvOperationHeader marks a KV delete or purge.
const kvOperationHeader = "KV-Operation"

// optionalStream looks a stream up; a missing one is nil, not an error
// (a namespace provisioned before the DLQ or receipts existed).
func optionalStream(ctx context.Context, js jetstream.JetStream, name string) (jetstream.Stream, error) {
	st, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", name, err)
	}
	return st, nil
}

// Counts are one kind's (or all kinds') commands by state. A command is
// counted once in each line that applies to it.
type Counts struct {
	// Issued: recorded in a decision in the log.
	Issued uint64 `json:"issued"`
	// InOutbox: distinct ids in OUTBOX, on <ns>.outbox.<kind> or as a
	// pending schedule (also ids published there by other producers).
	InOutbox uint64 `json:"in_outbox"`
	// Scheduled: a delayed command whose schedule has not fired yet.
	Scheduled uint64 `json:"scheduled"`
	// InFlight: on <ns>.outbox.<kind>, with no receipt and not dead.
	InFlight uint64 `json:"in_flight"`
	// Completed: a receipt with outcome done.
	Completed uint64 `json:"completed"`
	// Failed: a receipt with another outcome (failed).
	Failed uint64 `json:"failed"`
	// Dead: in the DLQ.
	Dead uint64 `json:"dead"`
	// Discarded: taken out of the DLQ by `esjet dlq discard` (its last
	// audit record says so) and not dead again: settled, never an orphan
	// or in flight.
	Discarded uint64 `json:"discarded"`
	// NotYetRelayed: issued by a decision the relay has not acked yet.
	NotYetRelayed uint64 `json:"not_yet_relayed"`
	// Expired: relayed, no outcome, no longer in OUTBOX, and its decision
	// (or its deliver-after time, when later) is older than OUTBOX's
	// retention (max age): aged out, not lost.
	Expired uint64 `json:"expired"`
	// Orphans: issued by a decision at or below the relay's ack floor, not
	// in OUTBOX (nor a pending schedule), no receipt, not dead, not
	// discarded, not expired.
	Orphans uint64 `json:"orphans"`
	// Duplicates: ids stored more than once on <ns>.outbox.<kind>.
	Duplicates uint64 `json:"duplicates"`
	// Stuck: in flight, the newest OUTBOX copy older than StuckAfter.
	Stuck uint64 `json:"stuck"`
}

// Drift is orphans + duplicates + stuck: what needs a look or a repair.
func (c Counts) Drift() uint64 { return c.Orphans + c.Duplicates + c.Stuck }

func (c *Counts) add(o Counts) {
	c.Issued += o.Issued
	c.InOutbox += o.InOutbox
	c.Scheduled += o.Scheduled
	c.InFlight += o.InFlight
	c.Completed += o.Completed
	c.Failed += o.Failed
	c.Dead += o.Dead
	c.Discarded += o.Discarded
	c.NotYetRelayed += o.NotYetRelayed
	c.Expired += o.Expired
	c.Orphans += o.Orphans
	c.Duplicates += o.Duplicates
	c.Stuck += o.Stuck
}

// Orphan is a relayed command missing from OUTBOX.
type Orphan struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	DecisionSeq uint64 `json:"decision_seq"` // EVENTS sequence of its decision
}

// Duplicate is a command id stored more than once on <ns>.outbox.<kind>.
// Harmless (receipts fold the later copies), reported, never repaired.
type Duplicate struct {
	ID    string `json:"id"`
	Kind  string `json:"kind"`
	Count int    `json:"count"`
}

// Stuck is a command in flight for longer than StuckAfter.
type Stuck struct {
	ID    string    `json:"id"`
	Kind  string    `json:"kind"`
	Seq   uint64    `json:"seq"`   // OUTBOX sequence of the newest copy
	Since time.Time `json:"since"` // when that copy was stored
}

// Scanned counts the messages each scan read.
type Scanned struct {
	Events   uint64 `json:"events"`
	Outbox   uint64 `json:"outbox"`
	DLQ      uint64 `json:"dlq"`
	Receipts uint64 `json:"receipts"`
	// Unidentified: OUTBOX or DLQ messages without a command id.
	Unidentified uint64 `json:"unidentified"`
}

// Report is the outcome of one [Reconciler.Run].
type Report struct {
	Namespace  string        `json:"namespace"`
	At         time.Time     `json:"at"`
	StuckAfter time.Duration `json:"-"` // in JSON: "stuck_after", e.g. "15m0s"
	// RelayConsumer says whether the relay's consumer exists; without it
	// nothing was relayed and every command is not_yet_relayed.
	RelayConsumer bool `json:"relay_consumer"`
	// RelayAckFloor: every decision at or below this EVENTS sequence has
	// been relayed.
	RelayAckFloor uint64 `json:"relay_ack_floor"`
	// EventsLastSeq is the last decision the scan read.
	EventsLastSeq uint64 `json:"events_last_seq"`
	// ExpiredBefore: commands due (decided, or deliver-after) before this
	// time may have aged out of OUTBOX (now − OUTBOX max age).
	ExpiredBefore time.Time `json:"expired_before,omitzero"`
	// Undecodable counts messages in the log that are not esjet decisions.
	Undecodable uint64            `json:"undecodable"`
	Scanned     Scanned           `json:"scanned"`
	Kinds       map[string]Counts `json:"kinds"`
	Totals      Counts            `json:"totals"`
	// The lists behind the drift counts, every one of them.
	Orphans    []Orphan    `json:"orphans"`
	Duplicates []Duplicate `json:"duplicates"`
	Stuck      []Stuck     `json:"stuck"`
}

// Drift is the totals' orphans + duplicates + stuck; zero means the outbox
// holds exactly what the log recorded.
func (r Report) Drift() uint64 { return r.Totals.Drift() }

type reportJSON Report

// MarshalJSON adds "stuck_after" (a Go duration string) and "drift".
func (r Report) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		reportJSON
		StuckAfter string `json:"stuck_after"`
		Drift      uint64 `json:"drift"`
	}{reportJSON(r), r.StuckAfter.String(), r.Drift()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Report) UnmarshalJSON(data []byte) error {
	var v struct {
		*reportJSON
		StuckAfter string `json:"stuck_after"`
	}
	v.reportJSON = (*reportJSON)(r)
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	if v.StuckAfter != "" {
		d, err := time.ParseDuration(v.StuckAfter)
		if err != nil {
			return fmt.Errorf("stuck_after: %w", err)
		}
		r.StuckAfter = d
	}
	return nil
}

// ErrRepairDeduplicated means OUTBOX dropped re-published orphans as
// duplicates: their ids were stored (then deleted) less than its duplicate
// window ago. Run the repair again once the window has passed.
var ErrRepairDeduplicated = errors.New("outbox: OUTBOX dropped re-published orphans as duplicates")

// Repair re-publishes every orphan of report to OUTBOX, built from its
// decision in the log exactly as the relay builds it (same headers,
// Nats-Msg-Id = the original command id; a command still due later becomes
// its schedule again). It returns how many OUTBOX stored. An orphan OUTBOX
// already holds again (repaired before, or relayed meanwhile) is not
// counted; duplicates are never touched. If OUTBOX refused some as
// duplicates of deleted messages, the error wraps [ErrRepairDeduplicated].
func (r *Reconciler) Repair(ctx context.Context, report Report) (int, error) {
	if len(report.Orphans) == 0 {
		return 0, nil
	}
	events, err := r.js.Stream(ctx, r.names.Events)
	if err != nil {
		return 0, fmt.Errorf("repair: event log %s: %w", r.names.Events, err)
	}
	outbox, err := r.js.Stream(ctx, r.names.Outbox)
	if err != nil {
		return 0, fmt.Errorf("repair: outbox %s: %w", r.names.Outbox, err)
	}
	const window = 1024
	pub, err := jetstream.New(r.js.Conn(), jetstream.WithPublishAsyncMaxPending(window), jetstream.WithPublishAsyncTimeout(30*time.Second))
	if err != nil {
		return 0, err
	}
	bySeq := map[uint64][]string{}
	for _, o := range report.Orphans {
		bySeq[o.DecisionSeq] = append(bySeq[o.DecisionSeq], o.ID)
	}
	type sent struct {
		id  string
		fut jetstream.PubAckFuture
	}
	var (
		pending []sent
		stored  int
		blocked []string
		errs    []error
	)
	wait := func() error {
		for _, s := range pending {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case err := <-s.fut.Err():
				errs = append(errs, fmt.Errorf("publish %s: %w", s.id, err))
			case ack := <-s.fut.Ok():
				if !ack.Duplicate {
					stored++
					r.logger.Debug("repaired orphan", "command_id", s.id, "stream", r.names.Outbox, "seq", ack.Sequence)
					continue
				}
				// The id is in OUTBOX's duplicate window. Fine if the copy it
				// points at exists; if it was deleted, the orphan stays.
				m, err := outbox.GetMsg(ctx, ack.Sequence)
				if err == nil && m.Header.Get(HeaderCommandID) == s.id {
					continue
				}
				blocked = append(blocked, s.id)
			}
		}
		pending = pending[:0]
		return nil
	}
	now := r.cfg.Now()
	for _, seq := range slices.Sorted(maps.Keys(bySeq)) {
		raw, err := events.GetMsg(ctx, seq)
		if err != nil {
			errs = append(errs, fmt.Errorf("read decision at seq %d: %w", seq, err))
			continue
		}
		rec, err := streams.DecodeRecord(raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, id := range bySeq[seq] {
			i := slices.IndexFunc(rec.Commands, func(c streams.Command) bool { return c.ID == id })
			if i < 0 {
				errs = append(errs, fmt.Errorf("decision at seq %d has no command %s: the report is stale or not from this namespace; run reconcile again before --repair", seq, id))
				continue
			}
			fut, err := pub.PublishMsgAsync(commandMsg(r.names.Namespace, rec, rec.Commands[i], now))
			if err != nil {
				errs = append(errs, fmt.Errorf("publish %s: %w", id, err))
				continue
			}
			pending = append(pending, sent{id: id, fut: fut})
			if len(pending) >= window/2 {
				if err := wait(); err != nil {
					return stored, err
				}
			}
		}
	}
	if err := wait(); err != nil {
		return stored, err
	}
	if len(blocked) > 0 {
		win := outbox.CachedInfo().Config.Duplicates
		errs = append(errs, fmt.Errorf("%w: %d orphan(s) (first %s) were stored and deleted less than the duplicate window (%s) ago; run the repair again once it has passed",
			ErrRepairDeduplicated, len(blocked), blocked[0], win))
	}
	if stored > 0 {
		r.logger.Info("repaired orphans: re-published to OUTBOX with their original ids", "stream", r.names.Outbox, "count", stored)
	}
	if err := errors.Join(errs...); err != nil {
		return stored, fmt.Errorf("repair: %w", err)
	}
	return stored, nil
}

package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Where an e2e step's time goes. During the phase the bench notes, per
// step, when it sent pay and when it saw charged; after the phase (not
// timed) it reads the stored times of a sample of the steps' four writes —
// the decision, its OUTBOX copy, the receipt, the outcome decision — and
// reports each hop between them. Stored times are JetStream's message
// timestamps, which the server takes when it stages a message: a message
// stored through an atomic batch (group commit under sync always) is
// stamped before the batch commits, so the outcome can be "stored" after
// the bench saw it; hence hops between stored times, and the round trip on
// the bench's clock.

// Hops is the e2e phase's breakdown of a step: p50 and p90 of each hop
// over the sampled steps.
type Hops struct {
	Steps   int `json:"steps"`             // steps sampled and found whole
	Missing int `json:"missing,omitempty"` // sampled steps with a write not found
	// SentToDecision is from the bench sending pay (its clock) to the
	// decision's stored time (the server's; one clock when embedded).
	SentToDecision   Hop `json:"sent_to_decision"`
	DecisionToOutbox Hop `json:"decision_to_outbox"` // → the relay's OUTBOX copy of charge stored
	OutboxToReceipt  Hop `json:"outbox_to_receipt"`  // → the worker's receipt stored (KV)
	ReceiptToOutcome Hop `json:"receipt_to_outcome"` // → the outcome decision (charged) stored
	RoundTrip        Hop `json:"round_trip"`         // sent → the bench saw charged (its clock)
}

// Hop is one hop's distribution in milliseconds.
type Hop struct {
	P50MS float64 `json:"p50_ms"`
	P90MS float64 `json:"p90_ms"`
	// Negative counts steps whose later write was stored before the
	// earlier one: a clock step, or (sent → decision) two hosts' clocks.
	Negative int `json:"negative,omitempty"`
}

// namedHop is a hop with its name as the notes print it.
type namedHop struct {
	name string
	hop  Hop
}

// inOrder returns the four hops in the order a step takes them.
func (h *Hops) inOrder() []namedHop {
	return []namedHop{
		{"sent → decision stored", h.SentToDecision},
		{"→ OUTBOX copy stored", h.DecisionToOutbox},
		{"→ receipt stored", h.OutboxToReceipt},
		{"→ outcome stored", h.ReceiptToOutcome},
	}
}

// step is one e2e operation: what the bench saw, then what it read.
type step struct {
	id       string    // aggregate id
	command  string    // charge's command id
	decision uint64    // EVENTS sequence of pay's decision
	sent     time.Time // before the bench sent pay
	seen     time.Time // when the bench saw charged
	// Stored times, read after the phase.
	decided, copied, receipted, outcome time.Time
}

// stepLog collects the phase's steps from its workers.
type stepLog struct {
	mu    sync.Mutex
	steps []*step
}

func (l *stepLog) add(s *step) {
	l.mu.Lock()
	l.steps = append(l.steps, s)
	l.mu.Unlock()
}

// Sampling: at most hopBlocks runs of hopBlock consecutive steps, spread
// evenly over the phase. A run's writes sit together in each stream, so
// each stream is read from just before a run's first write to its last —
// a few times hopBlock messages a run, whatever the phase or the log
// before it holds.
const (
	hopBlocks = 4
	hopBlock  = 500
	// hopLead is how far before a run's first write's stored time a read
	// by time starts: the server finds that time by bisecting the stream,
	// and stored times are not quite in stream order (a batch's messages
	// are stamped when staged, before messages stored meanwhile).
	hopLead = 250 * time.Millisecond
	// hopSlack is how long after the bench saw a run's last step a read
	// ends: the bench's clock may not be the server's.
	hopSlack = time.Second
)

// sample returns the runs of steps whose stored times are read, in the
// order their decisions were stored.
func sample(steps []*step) [][]*step {
	slices.SortFunc(steps, func(a, b *step) int { return cmp.Compare(a.decision, b.decision) })
	if len(steps) <= hopBlocks*hopBlock {
		if len(steps) == 0 {
			return nil
		}
		return [][]*step{steps}
	}
	var runs [][]*step
	for i := range hopBlocks {
		start := i * (len(steps) - hopBlock) / (hopBlocks - 1) // the last run ends with the last step
		runs = append(runs, steps[start:start+hopBlock])
	}
	return runs
}

// hops reads the stored times of a sample of the steps and returns the
// breakdown; nil when no step finished.
func (e *env) hops(ctx context.Context, steps []*step) (*Hops, error) {
	names := streams.NamesFor(e.ns)
	if err := settled(ctx, e.nodeJS, names.Events); err != nil {
		return nil, err
	}
	events := streams.NewScanner(e.nodeJS, names.Events, 1000)
	defer events.Close()
	outbox := streams.NewScanner(e.nodeJS, names.Outbox, 1000)
	defer outbox.Close()
	receipts := streams.NewScanner(e.nodeJS, wire.KVStream(names.Receipts), 1000)
	defer receipts.Close()
	var sampled []*step
	for _, run := range sample(steps) {
		if err := readRun(ctx, run, names, events, outbox, receipts); err != nil {
			return nil, err
		}
		sampled = append(sampled, run...)
	}
	if len(sampled) == 0 {
		return nil, nil
	}
	h := &Hops{}
	var rec [5]Recorder
	var negative [5]int
	for _, s := range sampled {
		if s.decided.IsZero() || s.copied.IsZero() || s.receipted.IsZero() || s.outcome.IsZero() {
			h.Missing++
			continue
		}
		h.Steps++
		// sent is compared by its wall clock: a stored time has no
		// monotonic reading.
		for i, d := range [5]time.Duration{s.decided.Sub(s.sent.Round(0)), s.copied.Sub(s.decided),
			s.receipted.Sub(s.copied), s.outcome.Sub(s.receipted), s.seen.Sub(s.sent)} {
			rec[i].Add(d)
			if d < 0 {
				negative[i]++
			}
		}
	}
	if h.Steps == 0 {
		return h, nil
	}
	for i, hop := range []*Hop{&h.SentToDecision, &h.DecisionToOutbox, &h.OutboxToReceipt, &h.ReceiptToOutcome, &h.RoundTrip} {
		*hop = Hop{P50MS: ms(rec[i].Percentile(50)), P90MS: ms(rec[i].Percentile(90)), Negative: negative[i]}
	}
	return h, nil
}

// settled waits (up to 5 s) until stream's last sequence stays put for
// 100 ms. The bench sees charged as the node publishes the outcome — under
// group commit, as a member of an atomic batch that the server commits a
// round later — so the last steps' outcomes may not be stored yet when the
// phase ends, and a read then would miss them.
func settled(ctx context.Context, js jetstream.JetStream, stream string) error {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	var last uint64
	for {
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.LastSeq == last || time.Now().After(deadline) {
			return nil
		}
		last = info.State.LastSeq
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// readRun fills the stored times of one run of consecutive steps: EVENTS
// from its first decision until every step's outcome, then OUTBOX from
// just before its first decision's stored time until every copy, then the
// receipts from just before the first copy's. Each read also ends once it
// is past the time the bench saw the run's last step (a write it did not
// find is not coming).
func readRun(ctx context.Context, run []*step, names streams.Names, events, outbox, receipts *streams.Scanner) error {
	bySubject := make(map[string]*step, len(run))
	byCommand := make(map[string]*step, len(run))
	byKey := make(map[string]*step, len(run))
	var last time.Time
	for _, s := range run {
		subject, err := names.AggregateSubject("acct", s.id)
		if err != nil {
			return err
		}
		bySubject[subject] = s
		byCommand[s.command] = s
		byKey[wire.KVSubject(names.Receipts, wire.ReceiptKey(s.command))] = s
		last = later(last, s.seen)
	}
	end := last.Round(0).Add(hopSlack)
	// read scans one stream and calls match for each message stored by
	// end; match says whether it completed a step.
	read := func(sc *streams.Scanner, r streams.ScanRange, match func(m *jetstream.RawStreamMsg) bool) error {
		left := len(run)
		_, err := sc.Scan(ctx, r, func(m *jetstream.RawStreamMsg) error {
			if m.Time.After(end) {
				return streams.ErrStopScan
			}
			if match(m) {
				if left--; left == 0 {
					return streams.ErrStopScan
				}
			}
			return nil
		})
		return err
	}
	err := read(events, streams.ScanRange{From: run[0].decision}, func(m *jetstream.RawStreamMsg) bool {
		s := bySubject[m.Subject]
		switch {
		case s == nil:
		case m.Sequence == s.decision:
			s.decided = m.Time
		case m.Sequence > s.decision && s.outcome.IsZero() && m.Header.Get(wire.HeaderEventTypes) == "charged":
			s.outcome = m.Time
			return true
		}
		return false
	})
	if err != nil {
		return fmt.Errorf("stored times of the decisions: %w", err)
	}
	first := func(at func(*step) time.Time) time.Time {
		var t time.Time
		for _, s := range run {
			if a := at(s); !a.IsZero() && (t.IsZero() || a.Before(t)) {
				t = a
			}
		}
		return t
	}
	since := first(func(s *step) time.Time { return s.decided })
	if since.IsZero() {
		return nil // nothing to go on: every step of the run is missing
	}
	err = read(outbox, streams.ScanRange{Since: since.Add(-hopLead)}, func(m *jetstream.RawStreamMsg) bool {
		s := byCommand[m.Header.Get(wire.HeaderCommandID)]
		// The relay's copy names its decision (not a re-drive's).
		if s == nil || !s.copied.IsZero() || m.Header.Get(wire.HeaderDecisionSeq) != strconv.FormatUint(s.decision, 10) {
			return false
		}
		s.copied = m.Time
		return true
	})
	if err != nil {
		return fmt.Errorf("stored times of the OUTBOX copies: %w", err)
	}
	if since = first(func(s *step) time.Time { return s.copied }); since.IsZero() {
		return nil
	}
	err = read(receipts, streams.ScanRange{Since: since.Add(-hopLead)}, func(m *jetstream.RawStreamMsg) bool {
		s := byKey[m.Subject]
		if s == nil || !s.receipted.IsZero() {
			return false
		}
		s.receipted = m.Time
		return true
	})
	if err != nil {
		return fmt.Errorf("stored times of the receipts: %w", err)
	}
	return nil
}

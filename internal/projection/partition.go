package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// partition is one owned (generation, partition) of a projection: it
// follows the log from its checkpoint and writes the view.
type partition struct {
	r      *Runner
	def    Definition
	gen    int
	part   int
	bucket string // the generation's view bucket (Control.bucket)
	logger *slog.Logger

	leaseRev uint64 // the fencing token: our lease's revision
	token    uint64 // the lease revision we took it at
	replay   bool
	paused   bool

	// built-in store
	store *kvStore
	tx    *Tx
	cpRev uint64 // the checkpoint key's revision we wrote last (the fence)
	// user's store
	sinkEvents []Event

	committed  uint64         // position of the stored checkpoint
	pos        uint64         // position passed (applied or parked), not yet stored
	events     uint64         // events handled in this generation (stored with the checkpoint)
	parked     map[string]int // aggregate subject → parked events (committed)
	pendParked map[string]int // parked in the batch not yet stored
	// parkedAt and pendParkedAt are the positions of the parked events,
	// committed and in the batch: the checkpoint records the lowest, so a
	// query knows the view does not hold it.
	parkedAt     map[uint64]bool
	pendParkedAt []uint64
	stopped      *HandlerError // single: the event it stopped at
	lastFlush    time.Time
	lastBeat     time.Time
	contended    time.Time   // until then, store in small batches (a shared document conflicted)
	batch        []batchItem // messages since the last store
	// requestsSeen is Control.Requests when the requests were last listed
	// (-1: never).
	requestsSeen int
	// committedEvents is events as stored with the checkpoint.
	committedEvents uint64
	sinceFlush      int
	logEnd          uint64
	// undelivered is when an idle check first found messages the
	// consumer should be delivering (zero: none, or one came since).
	undelivered time.Time
	rate        rateMeter
	// shown is committed and logEnd for other goroutines ([Runner.Progress]).
	shownPos, shownEnd atomic.Uint64
}

// open takes the partition over: opens its store, reads its checkpoint
// and fences it (a write that moves the checkpoint's revision, so an older
// owner's next write fails).
func (p *partition) open(ctx context.Context) error {
	p.parked, p.pendParked, p.parkedAt = map[string]int{}, map[string]int{}, map[uint64]bool{}
	p.requestsSeen = -1
	if p.def.Sink != nil {
		pos, err := p.def.Sink.Position(ctx)
		if err != nil {
			return fmt.Errorf("sink position: %w", err)
		}
		p.committed, p.pos = pos, pos
		return nil
	}
	st, err := p.r.viewStream(ctx, p.bucket)
	if err != nil {
		return err
	}
	p.store = newKVStore(p.r.nc, st, p.bucket)
	p.tx = newTx(p.store)
	p.tx.ctx = ctx
	var cp Checkpoint
	m, err := st.GetLastMsgForSubject(ctx, p.store.subj+cpKey(p.part))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return fmt.Errorf("read checkpoint: %w", err)
	default:
		p.cpRev = m.Sequence
		if len(m.Data) > 0 {
			if err := json.Unmarshal(m.Data, &cp); err != nil {
				return fmt.Errorf("checkpoint %s: %w", cpKey(p.part), err)
			}
		}
	}
	p.committed, p.pos, p.events, p.committedEvents = cp.Position, cp.Position, cp.Events, cp.Events
	if err := p.loadParked(ctx); err != nil {
		return err
	}
	return p.flush(ctx, true)
}

// flush stores what the batch did and the checkpoint at p.pos; force
// writes the checkpoint even when nothing moved (the takeover's fence).
func (p *partition) flush(ctx context.Context, force bool) error {
	p.lastFlush, p.sinceFlush = time.Now(), 0
	if p.def.Sink != nil {
		if p.pos == p.committed && len(p.sinkEvents) == 0 {
			return nil
		}
		if err := p.def.Sink.Apply(ctx, p.committed, p.pos, p.sinkEvents); err != nil {
			if errors.Is(err, ErrFenced) || len(p.sinkEvents) == 0 {
				return err
			}
			return p.sinkOneByOne(ctx)
		}
		p.committed, p.sinkEvents = p.pos, p.sinkEvents[:0]
		p.shownPos.Store(p.pos)
		p.shownEnd.Store(p.logEnd)
		return nil
	}
	if !force && p.pos == p.committed && p.tx.size() == 0 {
		return nil
	}
	cp, _ := json.Marshal(Checkpoint{Position: p.pos, Owner: p.r.nodeID, Token: p.token, At: time.Now().UTC(), Events: p.events, Parked: p.lowestParked()})
	rev, err := p.tx.commit(ctx, cpKey(p.part), cp, p.cpRev)
	if errors.Is(err, errWrongLast) {
		m, gerr := p.store.stream.GetLastMsgForSubject(ctx, p.store.subj+cpKey(p.part))
		if gerr == nil && m.Sequence != p.cpRev || errors.Is(gerr, jetstream.ErrMsgNotFound) && p.cpRev != 0 {
			return fmt.Errorf("%w: checkpoint %s of %s is at revision %d, this owner wrote %d", ErrFenced, cpKey(p.part), p.def.Name, revOf(m), p.cpRev)
		}
		return fmt.Errorf("%w: %v", ErrConflict, err)
	}
	if err != nil {
		return err
	}
	p.cpRev, p.committed, p.committedEvents = rev, p.pos, p.events
	if p.def.partitions() > 1 {
		// Other partitions write documents too: what this one read before
		// is likely stale, and would only fail the next batch. Read afresh.
		p.store.forget()
	}
	p.shownPos.Store(p.pos)
	p.shownEnd.Store(p.logEnd)
	for s, n := range p.pendParked {
		p.parked[s] += n
	}
	clear(p.pendParked)
	for _, pos := range p.pendParkedAt {
		p.parkedAt[pos] = true
	}
	p.pendParkedAt = p.pendParkedAt[:0]
	return nil
}

// lowestParked is the position of the first event parked in the partition
// or in the batch (0: none).
func (p *partition) lowestParked() uint64 {
	var low uint64
	for pos := range p.parkedAt {
		if low == 0 || pos < low {
			low = pos
		}
	}
	for _, pos := range p.pendParkedAt {
		if low == 0 || pos < low {
			low = pos
		}
	}
	return low
}

// sinkOneByOne applies a batch that failed one event per transaction, with
// retries, to find the failing event: the projection stops at it, having
// stored every event before.
func (p *partition) sinkOneByOne(ctx context.Context) error {
	events := append([]Event(nil), p.sinkEvents...)
	p.sinkEvents = p.sinkEvents[:0]
	for _, e := range events {
		var err error
		for attempt := 1; attempt <= p.r.cfg.Attempts; attempt++ {
			if err = p.def.Sink.Apply(ctx, p.committed, e.Position, []Event{e}); err == nil || errors.Is(err, ErrFenced) {
				break
			}
			time.Sleep(p.r.cfg.RetryBackoff << (attempt - 1))
		}
		if errors.Is(err, ErrFenced) {
			return err
		}
		if err != nil {
			p.stopped = &HandlerError{Projection: p.def.Name, Position: e.Position, Attempts: p.r.cfg.Attempts, Err: err}
			p.pos = p.committed
			p.logger.Error("projection stopped at a failing event", "position", e.Position, "event_type", e.Type,
				"aggregate_type", e.AggregateType, "aggregate_id", e.AggregateID, "error", err)
			return nil
		}
		p.committed = e.Position
	}
	if err := p.def.Sink.Apply(ctx, p.committed, p.pos, nil); err != nil {
		return err
	}
	p.committed = p.pos
	p.shownPos.Store(p.pos)
	return nil
}

func revOf(m *jetstream.RawStreamMsg) uint64 {
	if m == nil {
		return 0
	}
	return m.Sequence
}

// rewind drops everything not stored: the next read starts after the
// stored checkpoint (after a conflict or a failed write).
func (p *partition) rewind() {
	p.pos, p.events = p.committed, p.committedEvents
	p.batch = p.batch[:0]
	if p.tx != nil {
		p.tx.reset()
		p.store.forget()
	}
	p.sinkEvents = p.sinkEvents[:0]
	clear(p.pendParked)
	p.pendParkedAt = p.pendParkedAt[:0]
}

// heartbeat renews the lease with what the partition last saw. A lease
// someone else holds now ends the partition ([ErrFenced]).
func (p *partition) heartbeat(ctx context.Context, state, errText string) error {
	l := Lease{Owner: p.r.nodeID, Heartbeat: time.Now().UTC(), Position: p.committed, LogEnd: p.logEnd,
		Rate: p.rate.perSecond(), State: state, Error: errText, Parked: p.parkedCount(), Events: p.events}
	if p.stopped != nil {
		l.StoppedAt = p.stopped.Position
	}
	b, _ := json.Marshal(l)
	rev, err := p.r.ctl.kv.Update(ctx, leaseKey(p.def.Name, p.gen, p.part), b, p.leaseRev)
	if err != nil {
		if isWrongLast(err) || errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("%w: lease %s was taken over", ErrFenced, leaseKey(p.def.Name, p.gen, p.part))
		}
		return err
	}
	p.leaseRev, p.lastBeat = rev, time.Now()
	return nil
}

func (p *partition) parkedCount() int {
	n := 0
	for _, c := range p.parked {
		n += c
	}
	return n
}

// idleProgress moves the checkpoint to the log's end when nothing after
// the position matches the partition's subject filters: a filtered
// projection that is caught up stands at the end, not at its last match.
func (p *partition) idleProgress(ctx context.Context) error {
	info, err := p.r.events.Info(ctx)
	if err != nil {
		return err
	}
	last := info.State.LastSeq
	p.logEnd = last
	seq, _ := wire.SplitPosition(p.pos)
	if last <= seq || p.pos == 0 && last == 0 {
		p.undelivered = time.Time{}
		return nil
	}
	if len(p.def.AggregateTypes) == 0 {
		p.owed()
		return nil // the consumer delivers every message: nothing is skipped unseen
	}
	for _, f := range p.def.filters(p.r.log.Names()) {
		m, err := p.r.events.GetMsg(ctx, seq+1, jetstream.WithGetMsgSubject(f))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if m.Sequence <= last {
			p.owed()
			return nil // the consumer has it to deliver
		}
	}
	p.pos = wire.EndOfSeq(last)
	p.undelivered = time.Time{}
	return nil
}

// owed notes that the consumer has messages to deliver that have not come.
func (p *partition) owed() {
	if p.undelivered.IsZero() {
		p.undelivered = time.Now()
	}
}

// rateMeter is a recent events-per-second rate.
type rateMeter struct {
	since time.Time
	n     uint64
	last  float64
}

func (m *rateMeter) add(n int) {
	if m.since.IsZero() {
		m.since = time.Now()
	}
	m.n += uint64(n)
}

func (m *rateMeter) perSecond() float64 {
	if d := time.Since(m.since); !m.since.IsZero() && d >= time.Second {
		m.last = float64(m.n) / d.Seconds()
		m.since, m.n = time.Now(), 0
	}
	return m.last
}

package projection

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/shred"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Flush policy: a batch is stored when the consumer has nothing more
// pending, or at these bounds, whichever comes first.
const (
	flushDocs   = 500  // documents written (an atomic batch holds 1,000)
	flushEvents = 5000 // messages read
	flushEvery  = 500 * time.Millisecond
	flushLive   = 20 * time.Millisecond // at the log's head
	flushIdle   = 2 * time.Millisecond  // no message for this long: store now
)

// follow runs the partition until ctx ends or it loses its ownership. It
// (re)starts an ordered consumer after the stored position whenever the
// batch had to be dropped.
func (p *partition) follow(ctx context.Context) error {
	for {
		err := p.consume(ctx)
		switch {
		case ctx.Err() != nil:
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			p.flushOrRewind(fctx)
			cancel()
			return nil
		case errors.Is(err, ErrFenced), errors.Is(err, errNewerBuild):
			return err
		case errors.Is(err, errPullLost):
			p.logger.Info("projection partition starts a new consumer: the log holds what it has not delivered", "after", pullLostAfter, "position", p.committed)
			p.rewind()
		case err != nil:
			p.logger.Warn("projection partition restarts from its checkpoint", "error", err, "position", p.committed)
			p.rewind()
			// A request's work not stored leaves the parked events as stored.
			if err := p.loadParked(ctx); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(p.r.cfg.RetryBackoff):
			}
		}
	}
}

// pullLostAfter is how long a partition waits, idle, for messages the log
// holds after its position and its consumer has not delivered, before it
// starts a new consumer. On a cluster a new ordered consumer's first pull
// can be lost (its create reply reaches the client's server before the
// consumer's interest does, on another route connection: see
// streams.pullHeartbeat), and nats.go, waiting for a batch it counts as
// pending, would not pull again: the partition sat for ever.
const pullLostAfter = 5 * time.Second

// errPullLost: the consumer owes messages and sends none (pullLostAfter).
var errPullLost = errors.New("projection: the consumer delivers nothing of what the log holds")

func (p *partition) flushOrRewind(ctx context.Context) {
	if err := p.flush(ctx, false); err != nil {
		p.rewind()
	}
}

// consume reads the log after p.pos until an error asks for a restart.
func (p *partition) consume(ctx context.Context) error {
	seq, skip := wire.ResumeSeq(p.pos)
	cons, err := p.r.js.OrderedConsumer(ctx, p.r.names.Events, jetstream.OrderedConsumerConfig{
		FilterSubjects: p.def.filters(p.r.names), DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: seq,
	})
	if err != nil {
		return fmt.Errorf("ordered consumer from seq %d: %w", seq, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(2000))
	if err != nil {
		return fmt.Errorf("ordered consumer: %w", err)
	}
	defer it.Stop()
	stopIt := context.AfterFunc(ctx, it.Stop)
	defer stopIt()
	nextBeat := time.Now()
	for {
		if time.Now().After(nextBeat) {
			nextBeat = time.Now().Add(p.r.cfg.Heartbeat)
			if restart, err := p.tick(ctx); err != nil || restart {
				return err
			}
		}
		if p.paused || p.stopped != nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Until(nextBeat)):
			}
			continue
		}
		wait := p.r.cfg.Heartbeat
		if p.dirty() {
			wait = flushIdle // store soon when the log goes quiet
		}
		m, err := it.Next(jetstream.NextMaxWait(wait))
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, nats.ErrTimeout) {
			if p.dirty() {
				if err := p.flushBatch(ctx); err != nil {
					return err
				}
				continue
			}
			if err := p.idleProgress(ctx); err != nil {
				return err
			}
			if !p.undelivered.IsZero() && time.Since(p.undelivered) >= pullLostAfter {
				p.undelivered = time.Time{}
				return errPullLost
			}
			if err := p.flushBatch(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		p.undelivered = time.Time{}
		meta, err := m.Metadata()
		if err != nil {
			return err
		}
		raw := &jetstream.RawStreamMsg{Subject: m.Subject(), Sequence: meta.Sequence.Stream, Header: m.Headers(), Data: m.Data(), Time: meta.Timestamp}
		from := 0
		if raw.Sequence == seq {
			from = skip
		}
		if raw.Sequence > p.logEnd {
			p.logEnd = raw.Sequence
		}
		if err := p.process(ctx, raw, from); err != nil {
			return p.stopAtNewer(ctx, err)
		}
		p.batch = append(p.batch, batchItem{raw: raw, from: from})
		p.sinceFlush++
		// At the log's head a lone event is stored at once and a burst in
		// windows of flushLive (group commit); behind it, in big batches.
		every := flushEvery
		if meta.NumPending == 0 || time.Now().Before(p.contended) {
			every = flushLive
		}
		due := p.sinceFlush >= flushEvents || time.Since(p.lastFlush) >= every ||
			(p.tx != nil && p.tx.size() >= flushDocs) || len(p.sinkEvents) >= flushDocs || p.stopped != nil
		if due {
			if err := p.flushBatch(ctx); err != nil {
				return err
			}
			if meta.NumPending == 0 {
				p.logEnd = max(p.logEnd, raw.Sequence)
			}
		}
		if p.stopped != nil {
			_ = p.heartbeat(ctx, StateStopped, p.stopped.Error())
		}
	}
}

// dirty says whether the partition holds work not stored yet.
func (p *partition) dirty() bool {
	return p.pos != p.committed || (p.tx != nil && p.tx.size() > 0) || len(p.sinkEvents) > 0
}

// batchItem is a message of the batch not yet stored, kept to apply the
// batch again when it conflicts.
type batchItem struct {
	raw  *jetstream.RawStreamMsg
	from int
}

// flushBatch stores the batch; when another partition changed one of its
// documents meanwhile, it applies the batch's messages again on fresh
// documents and tries again.
func (p *partition) flushBatch(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		err := p.flush(ctx, false)
		if err == nil {
			p.batch = p.batch[:0]
			return nil
		}
		if !errors.Is(err, ErrConflict) || attempt >= 50 {
			return err
		}
		p.logger.Debug("projection batch conflicts: applied again on fresh documents", "position", p.committed, "attempt", attempt)
		// Small batches for a while: a big batch fighting another
		// partition's small ones for a shared document keeps losing.
		p.contended = time.Now().Add(2 * time.Second)
		if time.Since(p.lastBeat) >= p.r.cfg.Heartbeat {
			if err := p.heartbeat(ctx, StateRunning, ""); err != nil {
				return err // a long fight for shared documents keeps the lease
			}
		}
		items := p.batch
		p.rewind()
		p.events, p.stopped = p.committedEvents, nil
		for _, it := range items {
			if err := p.process(ctx, it.raw, it.from); err != nil {
				return err
			}
		}
		p.batch = items
	}
}

// process applies the wanted events of one message from index from.
func (p *partition) process(ctx context.Context, raw *jetstream.RawStreamMsg, from int) error {
	seq := raw.Sequence
	n := p.def.partitions()
	if raw.Header.Get(wire.HeaderArchived) != "" && PartitionOf(raw.Subject, n) == p.part && p.def.Archived == ArchivedReplay {
		return p.processArchived(ctx, raw)
	}
	tombstone := raw.Header.Get(wire.HeaderArchived) != "" // an ArchivedTombstone view's
	if PartitionOf(raw.Subject, n) != p.part || (!tombstone && !p.def.wantsAny(raw.Header.Get(wire.HeaderEventTypes))) {
		p.pos = wire.EndOfSeq(seq)
		return nil
	}
	rec, err := p.r.log.DecodeMessage(raw)
	var de *streams.DecodeError
	if errors.As(err, &de) {
		p.pos = wire.EndOfSeq(seq) // not an esjet decision: the log steps over it
		return nil
	}
	if err != nil {
		return fmt.Errorf("decode seq %d: %w", seq, err)
	}
	evs := rec.LogEvents(make([]streams.LogEvent, 0, len(rec.Events)), from)
	handled := 0
	for _, le := range evs {
		if !p.def.wants(le.Type) && le.Type != wire.EventArchived {
			p.pos = le.Position
			continue
		}
		e := Event{LogEvent: le, Replay: p.replay}
		if p.def.parking() && p.parked[raw.Subject]+p.pendParked[raw.Subject] > 0 {
			if err := p.park(e, raw.Subject, nil, 0, shred.IsSealed(raw.Data)); err != nil {
				return err
			}
			p.pos = le.Position
			continue
		}
		attempts, herr := p.apply(ctx, e)
		if herr != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if p.def.parking() {
				if err := p.park(e, raw.Subject, herr, attempts, shred.IsSealed(raw.Data)); err != nil {
					return err
				}
				p.pos = le.Position
				continue
			}
			// Single: stop before it; what came before is stored.
			p.pos = le.Position - 1
			p.stopped = &HandlerError{Projection: p.def.Name, Position: le.Position, Attempts: attempts, Err: herr}
			p.logger.Error("projection stopped at a failing event", "position", le.Position, "event_type", le.Type,
				"aggregate_type", le.AggregateType, "aggregate_id", le.AggregateID, "attempts", attempts, "error", herr)
			return nil
		}
		handled++
		p.pos = le.Position
	}
	p.events += uint64(handled)
	p.rate.add(handled)
	p.pos = wire.EndOfSeq(seq)
	return nil
}

// apply runs the handler on e with bounded retries; a failed attempt's
// writes are dropped. A Sink's events are kept for its next transaction.
func (p *partition) apply(ctx context.Context, e Event) (int, error) {
	if p.def.Sink != nil {
		p.sinkEvents = append(p.sinkEvents, e)
		return 1, nil
	}
	var err error
	for attempt := 1; ; attempt++ {
		mark := p.tx.mark()
		err = safeHandle(ctx, p.def.Handle, p.tx, e)
		if err == nil {
			return attempt, nil
		}
		p.tx.rollback(mark)
		if attempt >= p.r.cfg.Attempts || ctx.Err() != nil {
			return attempt, err
		}
		select {
		case <-ctx.Done():
			return attempt, err
		case <-time.After(p.r.cfg.RetryBackoff << (attempt - 1)):
		}
	}
}

// safeHandle turns a handler's panic into its error.
func safeHandle(ctx context.Context, h Handler, tx *Tx, e Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return h(ctx, tx, e)
}

// processArchived handles a tombstone for a view that replays archived
// history ([ArchivedReplay]): skipped while following, its archived
// events applied as they were during a rebuild.
func (p *partition) processArchived(ctx context.Context, raw *jetstream.RawStreamMsg) error {
	seq := raw.Sequence
	if !p.replay {
		p.pos = wire.EndOfSeq(seq)
		return nil
	}
	rec, err := p.r.log.DecodeMessage(raw)
	if err != nil {
		return fmt.Errorf("decode tombstone at seq %d: %w", seq, err)
	}
	old, err := p.r.log.Archived(ctx, rec)
	if err != nil {
		return fmt.Errorf("rebuild %s: %w", p.def.Name, err)
	}
	handled := 0
	for _, r := range old {
		if wire.IsTombstone(r) {
			continue
		}
		for _, le := range r.LogEvents(nil, 0) {
			if !p.def.wants(le.Type) {
				continue
			}
			e := Event{LogEvent: le, Replay: true}
			attempts, herr := p.apply(ctx, e)
			if herr != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if p.def.parking() {
					// The archive's records come opened, with no trace of
					// what was sealed, and a retry could not read an archived
					// event from the log again: the data stays in the record.
					if err := p.park(e, raw.Subject, herr, attempts, false); err != nil {
						return err
					}
					continue
				}
				// Single: stop before the tombstone, what came before is stored.
				p.pos = wire.EventPosition(seq, 0) - 1
				p.stopped = &HandlerError{Projection: p.def.Name, Position: le.Position, Attempts: attempts, Err: herr}
				return nil
			}
			handled++
		}
	}
	p.events += uint64(handled)
	p.rate.add(handled)
	p.pos = wire.EndOfSeq(seq)
	return nil
}

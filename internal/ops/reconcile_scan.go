package ops

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Each scan reads its stream over (after, to]. A stream whose subjects are
// only the filter is read unfiltered: the server then answers each batch
// without counting what the filter leaves pending (with a wildcard filter
// that count walks the rest of the stream, every batch).

func (r *Reconciler) scanEvents(ctx context.Context, s *scan, after, to uint64, tick func(), rep *Report) error {
	if to <= after {
		return nil
	}
	idSpace, err := streams.IDSpaceOf(ctx, r.js, r.names.Namespace)
	if err != nil {
		return err
	}
	space := wire.OutcomeSpace(idSpace)
	err = s.read(ctx, r.names.Events, streams.ScanRange{Filter: r.onlyFilter(ctx, r.names.Events, r.names.EventsFilter()), From: after + 1, To: to}, func(m *jetstream.RawStreamMsg) error {
		tick()
		s.scanned.Events++
		rec, err := streams.DecodeCommands(m) // the events are not needed, only checked
		if err != nil {
			// The relay skips these too: they carry no commands.
			rep.Undecodable++
			r.logger.Warn("reconcile: not an esjet decision; skipped", "stream", r.names.Events, "seq", m.Sequence, "error", err)
			return nil
		}
		if m.Header.Get(wire.HeaderArchived) != "" {
			rep.Tombstones++
			return nil
		}
		if id, o, ok := reportedOutcome(space, rec); ok {
			e := s.entries[id]
			switch {
			case e != nil: // issued earlier in the log (or still open)
				e.reported = true
				if o.Outcome == wire.OutcomeFailed {
					e.toldFailed = true
				}
			case s.incremental:
				// Settled by the checkpoint: a second outcome. (A command
				// with Report stays open until its outcome is recorded.)
				if err := s.touched(ctx, id, "an outcome recorded at seq %d", m.Sequence); err != nil {
					return err
				}
			}
		}
		for _, c := range rec.Commands {
			e := s.get(c.ID, c.Kind)
			if e.decisionSeq == 0 {
				// When it was decided, not when a restore stored it again.
				decided := rec.DecidedAt()
				e.decisionSeq, e.dueAt, e.report = rec.Seq, decided.UnixNano(), c.Report
				if c.DeliverAfter.After(decided) {
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

func (r *Reconciler) scanOutbox(ctx context.Context, s *scan, after, to uint64, tick func()) error {
	if to <= after {
		return nil
	}
	outboxPrefix, schedulePrefix := r.names.OutboxPrefix(), r.names.SchedulePrefix()
	err := s.read(ctx, r.names.Outbox, streams.ScanRange{From: after + 1, To: to}, func(m *jetstream.RawStreamMsg) error {
		tick()
		s.scanned.Outbox++
		id := m.Header.Get(wire.HeaderCommandID)
		if id == "" {
			id = m.Header.Get(jetstream.MsgIDHeader) // a producer outside esjet
		}
		if id != "" {
			if err := s.touched(ctx, id, "OUTBOX seq %d", m.Sequence); err != nil {
				return err
			}
		}
		switch {
		case id == "":
			s.scanned.Unidentified++
		case strings.HasPrefix(m.Subject, outboxPrefix):
			e := s.get(id, wire.KindOfCommandSubject(r.names.Namespace, m.Subject)) // any priority band
			// A re-drive from the DLQ is a second copy by design, not a
			// duplicate: it only counts when the relay's copy is gone.
			if !wire.IsRedrive(id, m.Header.Get(jetstream.MsgIDHeader)) || e.copies == 0 {
				e.copies++
				e.seqs = append(e.seqs, m.Sequence)
			}
			e.lastSeq, e.lastAt = m.Sequence, m.Time.UnixNano()
		case strings.HasPrefix(m.Subject, schedulePrefix):
			kind := m.Header.Get(wire.HeaderCommandKind)
			if kind == "" {
				kind = wire.KindOfSchedule(r.names.Namespace, m.Subject)
			}
			e := s.get(id, kind)
			e.scheduled, e.schedSeq = true, m.Sequence
		}
		return nil
	})
	return err
}

func (r *Reconciler) scanDLQ(ctx context.Context, s *scan, after, to uint64, tick func()) error {
	ns := r.names.Namespace
	// A dead letter has a subject of its own; its audit record (written
	// before the mark that replaces it and the copy that outlives it for a
	// while) settles it.
	err := s.read(ctx, r.names.DLQ, streams.ScanRange{Filter: r.onlyFilter(ctx, r.names.DLQ, r.names.DLQFilter()), From: after + 1, To: to}, func(m *jetstream.RawStreamMsg) error {
		tick()
		s.scanned.DLQ++
		id := m.Header.Get(wire.HeaderCommandID)
		letterKind, isLetter := wire.KindOfDeadLetter(ns, m.Subject)
		if isLetter && wire.IsSettleMark(m.Header) {
			return nil // its audit record came first
		}
		if id == "" {
			s.scanned.Unidentified++
			return nil
		}
		if err := s.touched(ctx, id, "DLQ seq %d", m.Sequence); err != nil {
			return err
		}
		if kind, ok := wire.KindOfAudit(ns, m.Subject); ok {
			// Stream order: the last action on the command wins.
			s.get(id, kind).discarded = m.Header.Get(HeaderDLQAction) == AuditDiscarded
			var a AuditRecord
			if json.Unmarshal(m.Data, &a) == nil {
				if e := s.unsettled[a.DLQSeq]; e != nil {
					e.dead = false
				}
				delete(s.unsettled, a.DLQSeq)
			}
			return nil
		}
		if !isLetter {
			return nil // a settled letter's copy: its audit record came first
		}
		s.unsettled[m.Sequence] = s.get(id, letterKind)
		return nil
	})
	return err
}

func (r *Reconciler) scanReceipts(ctx context.Context, s *scan, after, to uint64, tick func()) error {
	var touchErr error
	err := scanReceiptRange(ctx, r.js, r.names, s.read, after, to, func(re receiptEntry) bool {
		tick()
		s.scanned.Receipts++
		if touchErr = s.touched(ctx, re.ID, "receipt %s", re.Key); touchErr != nil {
			return false
		}
		switch {
		case re.Deleted:
			if e := s.entries[re.ID]; e != nil {
				e.outcome = ""
			}
		case re.Err != nil:
			r.logger.Warn("reconcile: unreadable receipt; skipped", "key", re.Key, "error", re.Err)
		default:
			e := s.get(re.ID, re.Receipt.Kind)
			e.outcome, e.refused = re.Receipt.Outcome, re.Receipt.OutcomeRefused
			if e.outcome == "" {
				e.outcome = "unknown"
			}
		}
		return true
	})
	if touchErr != nil {
		return touchErr
	}
	return err
}

// onlyFilter is "" (every subject) when filter is the stream's only
// subject, else filter.
func (r *Reconciler) onlyFilter(ctx context.Context, stream, filter string) string {
	st, err := r.js.Stream(ctx, stream)
	if err == nil && slices.Equal(st.CachedInfo().Config.Subjects, []string{filter}) {
		return ""
	}
	return filter
}

// reader reads a stream's messages over a range, in order.
type reader func(ctx context.Context, stream string, rng streams.ScanRange, fn func(*jetstream.RawStreamMsg) error) error

// directReader reads with batched direct gets of batch messages.
func directReader(js jetstream.JetStream, batch int) reader {
	return func(ctx context.Context, stream string, rng streams.ScanRange, fn func(*jetstream.RawStreamMsg) error) error {
		sc := streams.NewScanner(js, stream, batch)
		defer sc.Close()
		_, err := sc.Scan(ctx, rng, fn)
		return err
	}
}

// reader is how a run reads its ranges: a range of more than a batch
// through a consumer of its own when the connection may create one
// ([streams.ReadRange]: the server streams the messages instead of
// answering batch after batch, several times faster on a large log), else
// with direct gets.
func (r *Reconciler) reader(ctx context.Context) reader {
	direct := directReader(r.js, r.cfg.Batch)
	if !streams.ConsumersAllowed(ctx, r.js, r.names.Events, r.names.Outbox, r.names.DLQ, wire.KVStream(r.names.Receipts)) {
		return direct
	}
	return func(ctx context.Context, stream string, rng streams.ScanRange, fn func(*jetstream.RawStreamMsg) error) error {
		if rng.From == 0 || rng.To == 0 || rng.To-rng.From < uint64(r.cfg.Batch) {
			return direct(ctx, stream, rng, fn)
		}
		_, err := streams.ReadRange(ctx, r.js, stream, rng, r.cfg.Batch, fn)
		return err
	}
}

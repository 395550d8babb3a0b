package ops

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

func (r *Reconciler) scanEvents(ctx context.Context, s *scan, to uint64, tick func(), rep *Report) error {
	if to == 0 {
		return nil
	}
	sc := streams.NewScanner(r.js, r.names.Events, r.cfg.Batch)
	space := wire.OutcomeSpace(r.names.Namespace)
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
		if id, o, ok := reportedOutcome(space, rec); ok && o.Outcome == wire.OutcomeFailed {
			if e := s.entries[id]; e != nil { // issued earlier in the log
				e.toldFailed = true
			}
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
		id := m.Header.Get(wire.HeaderCommandID)
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
			if !wire.IsRedrive(id, m.Header.Get(jetstream.MsgIDHeader)) || e.copies == 0 {
				e.copies++
			}
			e.lastSeq, e.lastAt = m.Sequence, m.Time.UnixNano()
		case strings.HasPrefix(m.Subject, schedulePrefix):
			kind := m.Header.Get(wire.HeaderCommandKind)
			if kind == "" {
				kind = wire.KindOfSchedule(r.names.Namespace, m.Subject)
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
	// The DLQ denies deletes: a retried or discarded dead letter stays, and
	// the audit record naming its sequence (written after it) settles it.
	unsettled := map[uint64]*entry{}
	_, err := sc.Scan(ctx, streams.ScanRange{Filter: r.names.DLQFilter()}, func(m *jetstream.RawStreamMsg) error {
		tick()
		s.scanned.DLQ++
		id := m.Header.Get(wire.HeaderCommandID)
		if id == "" {
			s.scanned.Unidentified++
			return nil
		}
		if kind, ok := strings.CutPrefix(m.Subject, auditPrefix); ok {
			// Stream order: the last action on the command wins.
			s.get(id, kind).discarded = m.Header.Get(HeaderDLQAction) == AuditDiscarded
			var a AuditRecord
			if json.Unmarshal(m.Data, &a) == nil {
				delete(unsettled, a.DLQSeq)
			}
			return nil
		}
		unsettled[m.Sequence] = s.get(id, strings.TrimPrefix(m.Subject, prefix))
		return nil
	})
	for _, e := range unsettled {
		e.dead = true
	}
	return err
}

func (r *Reconciler) scanReceipts(ctx context.Context, s *scan, tick func()) error {
	return scanReceipts(ctx, r.js, r.names, r.cfg.Batch, func(re receiptEntry) {
		tick()
		s.scanned.Receipts++
		switch {
		case re.Deleted:
			if e := s.entries[re.ID]; e != nil {
				e.outcome = ""
			}
		case re.Err != nil:
			r.logger.Warn("reconcile: unreadable receipt; skipped", "key", re.Key, "error", re.Err)
		default:
			e := s.get(re.ID, re.Receipt.Kind)
			e.outcome = re.Receipt.Outcome
			if e.outcome == "" {
				e.outcome = "unknown"
			}
		}
	})
}

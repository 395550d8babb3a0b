package streams

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Reading one page of an aggregate's history at a cost that follows the
// page, not the aggregate.
//
// The page's first decision (the one holding version after) is found by a
// binary search over the aggregate's stream sequences: each probe is one
// direct get of the first message on the subject at or after a sequence
// (next_by_subj), whose versions say which half holds it. A probe reads
// one message, and there are about log2(last − first sequence) of them — a
// bounded seek, whatever the aggregate's length. The page itself is then
// read forwards from that decision with subject-filtered batches sized to
// what the page still needs.

// Page is what [Log.LoadPage] read of one aggregate.
type Page struct {
	// Records are the decision holding version after (none when after is
	// 0) and the ones after it, in order, until the page's events are in.
	Records []Record
	// Foreign are the foreign messages met among them, after the first
	// record (or from the subject's first message when after is 0).
	Foreign []Foreign
	// Now is where the aggregate stands: its last decision's version, at
	// the subject's last sequence (a foreign message's included).
	Now Position
}

// LoadPage reads the aggregate's decisions holding its events after version
// after, until limit of them are read (limit ≤ 0: all). The first record is
// the one holding version after itself when after > 0, so that the caller
// knows what came before the page. A page of an aggregate with no message
// on its subject is empty, with Now zero.
func (l *Log) LoadPage(ctx context.Context, typ, id string, after uint64, limit int) (Page, error) {
	subject, err := l.names.AggregateSubject(typ, id)
	if err != nil {
		return Page{}, err
	}
	p, err := l.page(ctx, subject, after, limit)
	if err == nil {
		p.Records, err = l.unarchive(ctx, p.Records, after)
	}
	if err != nil {
		return Page{}, fmt.Errorf("load page of %s/%s after version %d: %w", typ, id, after, err)
	}
	return p, nil
}

func (l *Log) page(ctx context.Context, subject string, after uint64, limit int) (Page, error) {
	last, err := l.getter.one(ctx, batchRequest{LastFor: subject})
	if errors.Is(err, errNoMessages) {
		return Page{}, nil
	}
	if err != nil {
		return Page{}, err
	}
	var p Page
	p.Now.Seq = last.Sequence
	lastDecision, err := l.holding(ctx, subject, math.MaxUint64, last)
	if err != nil {
		return Page{}, err
	}
	if lastDecision == nil {
		// Only foreign messages: read them all (there is no version).
		after = 0
	} else {
		p.Now.Version = lastDecision.LastVersion()
	}
	from := uint64(1) // the page's first message; 1: the subject's first
	if after > 0 {
		start, err := l.holding(ctx, subject, after, last)
		if err != nil {
			return Page{}, err
		}
		if start == nil && l.archive.Load() != nil {
			// Archived: the versions up to after are behind the
			// tombstone; read from the subject's first message.
			start = &Record{Seq: 1}
		}
		if start == nil {
			return Page{}, fmt.Errorf("%w: no decision on %s holds version %d or one before it", ErrCorrupt, subject, after)
		}
		from = start.Seq
	}
	next := uint64(1) // the version the next record must start at
	events := 0       // events after after read so far
	// The page is full when it holds limit events and more follow; the last
	// page reads on to the subject's last message (foreign ones after the
	// last decision belong to it).
	full := func() bool { return limit > 0 && events >= limit && next <= p.Now.Version }
	for from <= last.Sequence && !full() {
		// Each decision holds one event at least: what the page still needs,
		// plus the first record (which may hold only versions up to after).
		batch := l.cfg.LoadBatch
		if limit > 0 {
			batch = min(batch, max(limit-events, 0)+1)
		}
		got, pending, err := l.getter.get(ctx, batchRequest{Seq: from, NextFor: subject, Batch: batch}, func(m *jetstream.RawStreamMsg) error {
			if m.Sequence > last.Sequence || full() {
				return errStop
			}
			from = m.Sequence + 1
			r, err := l.decode(m)
			var de *DecodeError
			if errors.As(err, &de) {
				f := Foreign{Seq: m.Sequence, Subject: m.Subject, Stored: m.Time, Size: len(m.Data), Reason: de.Err.Error()}
				l.noteForeign(f)
				p.Foreign = append(p.Foreign, f)
				return nil
			}
			if err != nil {
				return err
			}
			if (len(p.Records) == 0 && after > 0) || wire.IsTombstone(r) {
				next = r.FirstVersion()
			}
			if r.FirstVersion() != next {
				return fmt.Errorf("%w: %s seq %d starts at version %d, expected %d", ErrCorrupt, subject, r.Seq, r.FirstVersion(), next)
			}
			next = r.LastVersion() + 1
			p.Records = append(p.Records, r)
			if r.LastVersion() > after {
				events += int(r.LastVersion() - max(after, r.FirstVersion()-1))
			}
			return nil
		})
		if errors.Is(err, errNoMessages) || errors.Is(err, errStop) {
			break
		}
		if err != nil {
			return Page{}, err
		}
		if got == 0 || pending == 0 {
			break
		}
	}
	return p, nil
}

// holding finds the decision on subject that holds version v, or the last
// one before it (the last decision of all for MaxUint64), by a binary
// search over sequences up to last's (the subject's last message). It is
// nil when no decision holds v or a version before it.
func (l *Log) holding(ctx context.Context, subject string, v uint64, last *jetstream.RawStreamMsg) (*Record, error) {
	var best *Record
	if r, err := l.decode(last); err == nil && r.FirstVersion() <= v {
		return &r, nil
	}
	// The answer, if it is not best, is a decision in [lo, hi).
	lo, hi := uint64(1), last.Sequence
	for lo < hi {
		mid := lo + (hi-lo)/2
		r, ok, err := l.decisionFrom(ctx, subject, mid, hi)
		if err != nil {
			return nil, err
		}
		if !ok || r.FirstVersion() > v {
			// No decision in [mid, hi) starts at or before v.
			hi = mid
			continue
		}
		best, lo = &r, r.Seq+1
		if r.LastVersion() >= v {
			break
		}
	}
	return best, nil
}

// decisionFrom is the first decision on subject at or after sequence from
// and before sequence before; ok is false when there is none. Foreign
// messages are stepped over.
func (l *Log) decisionFrom(ctx context.Context, subject string, from, before uint64) (Record, bool, error) {
	for from < before {
		m, err := l.getter.one(ctx, batchRequest{Seq: from, NextFor: subject})
		if errors.Is(err, errNoMessages) {
			return Record{}, false, nil
		}
		if err != nil {
			return Record{}, false, err
		}
		if m.Sequence >= before {
			return Record{}, false, nil
		}
		r, err := l.decode(m)
		var de *DecodeError
		if errors.As(err, &de) {
			from = m.Sequence + 1
			continue
		}
		if err != nil {
			return Record{}, false, err
		}
		return r, true, nil
	}
	return Record{}, false, nil
}

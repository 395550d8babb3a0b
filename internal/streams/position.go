package streams

import (
	"context"
	"errors"
	"fmt"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// ReadAfter returns up to limit events of the whole log stored after
// position after (0: from the first), in log order, with upcasters applied,
// and the position the read stands at (pass it as after to read on): the
// last event returned, or further when the read stepped over messages that
// are not esjet decisions. limit ≤ 0 means [Config.LoadBatch]. An empty
// result with next == after means the log holds nothing after it yet. A
// message a newer build wrote ([TooNew]) ends the page before it; a read
// that starts at it fails with the refusal.
func (l *Log) ReadAfter(ctx context.Context, after uint64, limit int) (events []LogEvent, next uint64, err error) {
	if limit <= 0 {
		limit = l.cfg.LoadBatch
	}
	seq, skip := wire.ResumeSeq(after)
	next = after
	events = make([]LogEvent, 0, min(limit, 1024))
	err = l.scan(ctx, l.names.EventsFilter(), seq, 0, func(f Foreign) {
		if len(events) < limit {
			next = wire.EndOfSeq(f.Seq)
		}
	}, func(r Record) error {
		if len(events) >= limit {
			return errStop
		}
		from, before := 0, len(events)
		if r.Seq == seq {
			from = skip
		}
		events = r.LogEvents(events, from)
		if len(events) == before { // every event of it was read before
			next = wire.EndOfSeq(r.Seq)
			return nil
		}
		if len(events) > limit {
			events = events[:limit]
		}
		next = events[len(events)-1].Position
		if next == r.LastPosition() {
			next = wire.EndOfSeq(r.Seq)
		}
		if len(events) == limit {
			return errStop
		}
		return nil
	})
	var tn TooNew
	if err != nil && len(events) > 0 && errors.As(err, &tn) && tn.TooNew() {
		// A message a newer build wrote ends the page: the events before
		// it are returned, and the read after them is refused.
		return events, next, nil
	}
	if err != nil && !errors.Is(err, errStop) {
		return nil, after, fmt.Errorf("read log after position %d: %w", after, err)
	}
	return events, next, nil
}

// DecodeMessage decodes a message read from the event stream by a consumer
// of the caller's own (a projection's ordered consumer) into a Record,
// with upcasters applied. A message that is not an esjet decision is a
// [*DecodeError]: step over it.
func (l *Log) DecodeMessage(m *jetstream.RawStreamMsg) (Record, error) { return l.decode(m) }

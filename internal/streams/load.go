package streams

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// LoadOption varies one Load call.
type LoadOption func(*loadOpts)

type loadOpts struct{ atLeast uint64 }

// AtLeast makes Load wait (briefly, bounded by the append timeout) until it
// has read the aggregate up to stream sequence seq. Use it to read your own
// writes on a cluster: direct gets are served by every replica, and a
// follower may not have applied the newest message yet.
func AtLeast(seq uint64) LoadOption { return func(o *loadOpts) { o.atLeast = seq } }

// Load returns the aggregate's decisions stored after position after (the
// zero Position: its whole history), in order, with upcasters applied. It
// reads with direct gets, at a cost that follows the aggregate's messages,
// not the log (tail.go): no consumer is created. A gap in the
// versions is reported as [ErrCorrupt] rather than folded. A message on the
// subject that is not an esjet decision is skipped (see [Log.LoadTail], which
// also returns it and the position that counts it).
//
// On a replicated stream a read may be served by a follower a few
// milliseconds behind the leader; appends stay safe (they expect a position
// and conflict on a stale one), and [AtLeast] waits for a known write.
//
// Load validates typ and id ([wire.NewAggregateRef]); [Log.LoadTail] takes
// an aggregate validated where the request came in.
func (l *Log) Load(ctx context.Context, typ, id string, after Position, opts ...LoadOption) ([]Record, error) {
	a, err := wire.NewAggregateRef(typ, id)
	if err != nil {
		return nil, err
	}
	t, err := l.LoadTail(ctx, a, after, opts...)
	return t.Records, err
}

// LoadTail is [Log.Load] with what it stepped over: the foreign messages
// on the aggregate's subject (each logged at WARN the first time this Log
// meets it, and counted by [Log.ForeignSkipped]) and the subject's last
// sequence read, foreign or not. An aggregate whose subject received a stray
// message stays usable: [Tail.Position] is where its next append must expect
// it to stand.
func (l *Log) LoadTail(ctx context.Context, a wire.AggregateRef, after Position, opts ...LoadOption) (Tail, error) {
	var o loadOpts
	for _, opt := range opts {
		opt(&o)
	}
	if o.atLeast <= after.Seq {
		return l.load(ctx, a, after)
	}
	deadline := time.Now().Add(l.cfg.AppendTimeout)
	for {
		t, err := l.load(ctx, a, after)
		if err != nil || t.LastSeq >= o.atLeast {
			return t, err
		}
		if time.Now().After(deadline) {
			return Tail{}, fmt.Errorf("load %s: the log did not reach seq %d within %s", a, o.atLeast, l.cfg.AppendTimeout)
		}
		select {
		case <-ctx.Done():
			return Tail{}, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func (l *Log) load(ctx context.Context, a wire.AggregateRef, after Position) (Tail, error) {
	subject, err := l.subjectOf(a)
	if err != nil {
		return Tail{}, err
	}
	msgs, err := l.tailMsgs(ctx, subject, after)
	if err != nil {
		return Tail{}, fmt.Errorf("load %s: %w", a, err)
	}
	var t Tail
	next := after.Version + 1
	for _, m := range msgs {
		t.LastSeq = m.Sequence
		r, err := l.decode(m)
		var de *DecodeError
		if errors.As(err, &de) {
			f := Foreign{Seq: m.Sequence, Subject: m.Subject, Stored: m.Time, Size: len(m.Data), Reason: de.Err.Error()}
			l.noteForeign(f)
			t.Foreign = append(t.Foreign, f)
			continue
		}
		if err != nil {
			return Tail{}, fmt.Errorf("load %s: %w", a, err)
		}
		// A caller that knows only the sequence (Version 0 with Seq > 0)
		// learns the version from the first record.
		if after.Seq > 0 && after.Version == 0 && len(t.Records) == 0 {
			next = r.FirstVersion()
		}
		// A tombstone stands for everything before it (archived): it
		// carries the state, and the versions go on from its own.
		if wire.IsTombstone(r) {
			next = r.FirstVersion()
		}
		if r.FirstVersion() != next {
			return Tail{}, fmt.Errorf("load %s: %w: %s seq %d starts at version %d, expected %d", a, ErrCorrupt, subject, r.Seq, r.FirstVersion(), next)
		}
		next = r.LastVersion() + 1
		t.Records = append(t.Records, r)
	}
	return t, nil
}

// ReadFrom returns up to max records of the whole log (every aggregate)
// starting at stream sequence from (0 or 1: the beginning), in log order.
// A message that is not an esjet decision (published to an aggregate
// subject by something else) is skipped, as [Log.Load] skips it.
// max ≤ 0 means no limit. It is for projections, tools and reconciliation;
// the relay uses a durable consumer.
func (l *Log) ReadFrom(ctx context.Context, from uint64, max int) ([]Record, error) {
	if from == 0 {
		from = 1
	}
	var out []Record
	if max > 0 {
		out = make([]Record, 0, min(max, 1<<16))
	}
	err := l.scan(ctx, l.names.EventsFilter(), from, max, func(Foreign) {}, func(r Record) error {
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read log from seq %d: %w", from, err)
	}
	return out, nil
}

// scan calls fn for each record on filter from sequence from, batch by batch,
// until the stream has no more or limit records were passed (limit ≤ 0: no
// limit). A message that is not an esjet decision goes to foreign instead
// (after [Log.noteForeign]); a nil foreign makes it an error.
func (l *Log) scan(ctx context.Context, filter string, from uint64, limit int, foreign func(Foreign), fn func(Record) error) error {
	seen := 0
	for {
		batch := l.cfg.LoadBatch
		if limit > 0 && limit-seen < batch {
			batch = limit - seen
		}
		got, pending, err := l.getter.get(ctx, batchRequest{Seq: from, NextFor: filter, Batch: batch}, func(m *jetstream.RawStreamMsg) error {
			from = m.Sequence + 1
			rec, err := l.decode(m)
			var de *DecodeError
			if foreign != nil && errors.As(err, &de) {
				f := Foreign{Seq: m.Sequence, Subject: m.Subject, Stored: m.Time, Size: len(m.Data), Reason: de.Err.Error()}
				l.noteForeign(f)
				foreign(f)
				return nil
			}
			if err != nil {
				return err
			}
			return fn(rec)
		})
		if errors.Is(err, errNoMessages) {
			return nil
		}
		if err != nil {
			return err
		}
		seen += got
		// A batch may end short of its size when it hit max_bytes: only
		// "nothing more pending" (or nothing at all) ends the scan.
		if got == 0 || pending == 0 || (limit > 0 && seen >= limit) {
			return nil
		}
		if l.longRead(ctx, filter, pending, limit-seen) {
			return l.scanConsumer(ctx, filter, from, max(limit-seen, 0), foreign, fn)
		}
	}
}

// longRead says whether the rest of a scan of the whole log (filter the
// events filter), with pending messages still stored after it and left
// records to go (≤ 0: all), goes through an ordered consumer of the Log's
// own rather than more batched direct gets: when it is long (more than
// longReadBatches batches) and the connection may create consumers on
// EVENTS (asked once; the operator role may not). A short read never pays
// for a consumer: the first batch says how much is left.
func (l *Log) longRead(ctx context.Context, filter string, pending uint64, left int) bool {
	long := uint64(longReadBatches * l.cfg.LoadBatch)
	if filter != l.names.EventsFilter() || pending <= long || (left > 0 && uint64(left) <= long) {
		return false
	}
	l.consumers.once.Do(func() {
		// Not the caller's cancellation: the answer is kept for the Log's life.
		l.consumers.allowed = ConsumersAllowed(context.WithoutCancel(ctx), l.js, l.names.Events)
	})
	if l.consumers.allowed {
		l.consumers.reads.Add(1)
	}
	return l.consumers.allowed
}

// longReadBatches is how many batches of direct gets a read may take before
// an ordered consumer pays for its creation (a request, and a delete).
const longReadBatches = 4

// scanConsumer is scan through [ReadRange]: the server streams the
// messages, one goroutine takes them off the consumer and this one decodes
// them, each working on its own part of the read.
func (l *Log) scanConsumer(ctx context.Context, filter string, from uint64, limit int, foreign func(Foreign), fn func(Record) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgs := make(chan *jetstream.RawStreamMsg, 64) // enough to keep both goroutines busy; ReadRange bounds the bytes it asks for
	var readErr error
	go func() {
		defer close(msgs)
		_, readErr = ReadRange(ctx, l.js, l.names.Events, ScanRange{Filter: filter, From: max(from, 1), To: math.MaxUint64}, l.cfg.LoadBatch, func(m *jetstream.RawStreamMsg) error {
			select {
			case msgs <- m:
				return nil
			case <-ctx.Done():
				// Not ErrStopScan: ReadRange takes that for a read that
				// ended well, and a caller's cancellation must come back.
				return ctx.Err()
			}
		})
	}()
	seen := 0
	var failed error
	stopped := false
	for m := range msgs {
		if stopped {
			continue // the reader is stopping: let it finish
		}
		seen++ // limit counts messages, foreign ones too, as scan's batches do
		rec, err := l.decode(m)
		var de *DecodeError
		if foreign != nil && errors.As(err, &de) {
			f := Foreign{Seq: m.Sequence, Subject: m.Subject, Stored: m.Time, Size: len(m.Data), Reason: de.Err.Error()}
			l.noteForeign(f)
			foreign(f)
			err = nil
		} else if err == nil {
			err = fn(rec)
		}
		if err != nil || (limit > 0 && seen >= limit) {
			failed, stopped = err, true // fn's own errors (errStop too) go back as they are
			cancel()
		}
	}
	if stopped {
		return failed
	}
	return readErr
}

// decode turns a stored message into a Record with upcasters applied.
func (l *Log) decode(m *jetstream.RawStreamMsg) (Record, error) {
	rec, err := decodeRaw(m)
	if err != nil {
		l.noteRefused(err, m.Sequence, m.Subject)
		return Record{}, err
	}
	if l.cfg.Open != nil {
		if err := l.cfg.Open(&rec); err != nil {
			return Record{}, fmt.Errorf("read seq %d: %w", m.Sequence, err)
		}
	}
	if l.cfg.Upcast != nil {
		for i, e := range rec.Events {
			up, err := l.cfg.Upcast(rec.AggregateType, e)
			if err != nil {
				l.noteRefused(err, m.Sequence, m.Subject)
				return Record{}, fmt.Errorf("upcast event %s (%s schema %d) at seq %d: %w", e.ID, e.Type, e.Schema, m.Sequence, err)
			}
			rec.Events[i] = up
		}
	}
	return rec, nil
}

// FindDecision looks for decision id among the aggregate's decisions stored
// at or after since (by server time) — how the raw API answers a retried
// request whose expected version has since moved on. ok is false when it is
// not there.
func (l *Log) FindDecision(ctx context.Context, a wire.AggregateRef, decisionID string, since time.Time) (Record, bool, error) {
	subject, err := l.subjectOf(a)
	if err != nil {
		return Record{}, false, err
	}
	// The first batch starts at a time; the next ones continue by sequence
	// (several messages may share a timestamp).
	req := batchRequest{StartTime: &since, NextFor: subject, Batch: l.cfg.LoadBatch}
	for {
		var found *jetstream.RawStreamMsg
		got, pending, err := l.getter.get(ctx, req, func(m *jetstream.RawStreamMsg) error {
			req.StartTime, req.Seq = nil, m.Sequence+1
			if m.Header.Get(jetstream.MsgIDHeader) == decisionID {
				found = m
				return errStop
			}
			return nil
		})
		switch {
		case found != nil:
			rec, err := l.decode(found)
			return rec, err == nil, err
		case errors.Is(err, errNoMessages):
			return Record{}, false, nil
		case err != nil:
			return Record{}, false, err
		case got == 0 || pending == 0:
			return Record{}, false, nil
		}
	}
}

// errStop ends a scan early; it never leaves the package.
var errStop = errors.New("stop")

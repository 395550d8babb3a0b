package streams

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Append stores d as ONE message on its aggregate's subject, expecting the
// aggregate to stand at after (the zero Position: a new aggregate). It
// assigns event versions after.Version+1…, event ids and times where empty,
// and command ids, and returns the stored record.
//
// Errors:
//   - a [*wire.TokenError] or [ErrInvalidDecision] for bad input, a [*SizeError]
//     for an oversized decision: nothing was written;
//   - a [*ConflictError] (wraps [ErrVersionConflict]) when the aggregate has
//     moved; it carries the actual position;
//   - [ErrUnknownOutcome] when every attempt timed out and the tail does not
//     show the decision; calling Append again with the same d.ID resolves it.
//
// Append is idempotent by d.ID: when the same decision had already been
// stored (a retry after a lost reply), it returns the ORIGINAL record, on a
// single server (where the retry gets 10071) and on a cluster (a duplicate
// ack), and stores nothing twice.
//
// Append validates d's aggregate type and id; [Log.AppendTo] takes an
// aggregate validated where the request came in.
func (l *Log) Append(ctx context.Context, d Decision, after Position) (Record, error) {
	a, err := wire.NewAggregateRef(d.AggregateType, d.AggregateID)
	if err != nil {
		return Record{}, err
	}
	return l.AppendTo(ctx, a, d, after)
}

// AppendTo is [Log.Append] of d to aggregate a: d's aggregate type and id
// are a's.
func (l *Log) AppendTo(ctx context.Context, a wire.AggregateRef, d Decision, after Position) (Record, error) {
	d, subject, msg, err := l.build(a, d, after)
	if err != nil {
		return Record{}, err
	}

	var lastErr error
	try := l.cfg.AppendTimeout
	// Tries that time out go on, shorter, for as long as AppendAttempts
	// full ones would have taken; fast failures (no responders) count.
	patience := time.Now().Add(l.cfg.AppendTimeout * time.Duration(l.cfg.AppendAttempts))
	timedOut := false
	attempt := 1
	for ; attempt <= l.cfg.AppendAttempts || (timedOut && time.Now().Before(patience)); attempt++ {
		actx, cancel := context.WithTimeout(ctx, try)
		ack, err := l.publish(actx, msg, after.Seq, attempt)
		cancel()
		switch {
		case err == nil && !ack.Duplicate:
			return Record{Decision: d, Seq: ack.Sequence, Subject: subject}, nil
		case err == nil:
			// Clustered retry of a committed append: dedup answers first,
			// with the original sequence.
			return l.original(ctx, subject, d.ID, ack.Sequence)
		case isConflict(err):
			// On one server a retry of a committed append lands here (the
			// expectation is checked before dedup): look for our decision
			// right after the expected position before calling it a conflict.
			if rec, ok, ferr := l.findAfter(ctx, subject, after.Seq, d.ID); ferr != nil {
				return Record{}, fmt.Errorf("append %s: resolve conflict: %w", subject, ferr)
			} else if ok {
				return rec, nil
			}
			actual, perr := l.lastPosition(ctx, subject)
			if perr != nil {
				return Record{}, fmt.Errorf("append %s: read actual position: %w", subject, perr)
			}
			return Record{}, &ConflictError{Subject: subject, Expected: after, Actual: actual, Err: err}
		case isStorageFull(err):
			return Record{}, fmt.Errorf("append %s: %w: %w", subject, ErrStorageFull, err)
		case isTooLarge(err):
			return Record{}, fmt.Errorf("append %s: %w: %w", subject, ErrTooLarge, err)
		case ambiguous(ctx, err):
			lastErr = err
			timedOut = errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
			l.logger.Warn("append attempt timed out; retrying with the same decision id",
				"subject", subject, "decision_id", d.ID, "attempt", attempt, "error", err)
			// The stream's leader may be frozen (a stopped process, a VM
			// pause, a partition that keeps TCP up): the other servers keep
			// its subscription until their route to it times out, minutes
			// later, so a publish sent before a new leader is elected waits
			// for nothing. Once one is elected, every publish reaches it
			// too: shorter tries find it within retryTimeout of its
			// election instead of a whole AppendTimeout later.
			try = min(l.cfg.AppendTimeout, retryTimeout)
			continue
		case inProcess(ctx, err):
			// An earlier try of this decision is still being committed:
			// ask again shortly; the answer will be its ack (duplicate) or
			// the conflict it caused.
			lastErr = err
			select {
			case <-ctx.Done():
			case <-time.After(inProcessPause):
			}
			continue
		case ctx.Err() != nil:
			// The caller's context ended while the publish was out: it may
			// have been stored.
			return Record{}, fmt.Errorf("append %s (decision %s): %w: %w", subject, d.ID, ErrUnknownOutcome, ctx.Err())
		default:
			return Record{}, fmt.Errorf("append %s: %w", subject, err)
		}
	}
	// Every attempt timed out. The decision may still have been stored: the
	// tail is the judge.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.AppendTimeout)
	defer cancel()
	if rec, ok, err := l.findAfter(rctx, subject, after.Seq, d.ID); err == nil && ok {
		return rec, nil
	}
	// A server that ran out of disk disables JetStream and stops answering
	// publishes: say so rather than only "unknown".
	if _, err := l.js.AccountInfo(rctx); errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return Record{}, fmt.Errorf("append %s (decision %s): %w: JetStream is disabled on the server (out of disk space?): %w",
			subject, d.ID, ErrStorageFull, err)
	}
	return Record{}, fmt.Errorf("append %s (decision %s): %w after %d attempts: %w",
		subject, d.ID, ErrUnknownOutcome, attempt-1, lastErr)
}

// publish sends one try of an append: the first through the group commit
// when it is on, the retries (same Msg-Id, same expectation) on their own.
func (l *Log) publish(ctx context.Context, msg *nats.Msg, after uint64, attempt int) (*jetstream.PubAck, error) {
	if l.commit != nil && attempt == 1 {
		return l.commit.publish(ctx, msg)
	}
	return l.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(after))
}

// build checks and prepares d for aggregate a's subject at after and
// encodes it with its expectation: the message Append publishes.
func (l *Log) build(a wire.AggregateRef, d Decision, after Position) (Decision, string, *nats.Msg, error) {
	subject, err := l.subjectOf(a)
	if err != nil {
		return d, "", nil, err
	}
	d.AggregateType, d.AggregateID = a.Type(), a.ID()
	now := l.cfg.Now()
	d, err = prepare(d, after, now)
	if err != nil {
		return d, "", nil, err
	}
	if l.cfg.MaxDelay > 0 {
		for _, c := range d.Commands {
			if c.DeliverAfter.After(now.Add(l.cfg.MaxDelay)) {
				return d, "", nil, invalid("command %s (%s) is due %s, more than %s ahead: OUTBOX keeps a delayed command only for streams.outbox_max_age",
					c.ID, c.Kind, c.DeliverAfter.Format(time.RFC3339), l.cfg.MaxDelay)
			}
		}
	}
	msg, err := encode(subject, d)
	if err != nil {
		return d, "", nil, err
	}
	// The expectation travels as a header and the server counts it against
	// max_msg_size: set it before measuring (PublishMsg sets the same value).
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(after.Seq, 10))
	if size := msgSize(msg); size > l.cfg.MaxMessageSize {
		return d, "", nil, &SizeError{Size: size, Limit: l.cfg.MaxMessageSize}
	}
	return d, subject, msg, nil
}

// retryTimeout bounds the tries after one timed out; inProcessPause is the
// wait before asking again about a decision still being committed.
const (
	retryTimeout   = 2 * time.Second
	inProcessPause = 250 * time.Millisecond
)

// inProcess reports JetStream's 10158 "duplicate message id is in process"
// (a clustered stream still committing an earlier try with the same
// Msg-Id), unless the caller's context ended.
func inProcess(ctx context.Context, err error) bool {
	var apiErr *jetstream.APIError
	return ctx.Err() == nil && errors.As(err, &apiErr) && apiErr.ErrorCode == 10158
}

// ambiguous reports a publish error after which the message may or may not
// have been stored: a timeout of this attempt (not of the caller's context) or
// no stream responder during a leader change.
func ambiguous(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false // the caller gave up: see the loop's ctx check
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders)
}

// findAfter reads the first message on subject after seq: with every write
// expecting its predecessor, the only place our decision can be.
func (l *Log) findAfter(ctx context.Context, subject string, seq uint64, id string) (Record, bool, error) {
	first, err := l.getter.one(ctx, batchRequest{Seq: seq + 1, NextFor: subject})
	if errors.Is(err, errNoMessages) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, err
	}
	if first.Header.Get(jetstream.MsgIDHeader) != id {
		return Record{}, false, nil
	}
	rec, err := l.decode(first)
	return rec, err == nil, err
}

// original returns the stored message seq, which a duplicate ack named as
// the first copy of decision id.
func (l *Log) original(ctx context.Context, subject, id string, seq uint64) (Record, error) {
	m, err := l.leaderGet(ctx, seq, "")
	if err != nil {
		// Stored (the ack said so), but unreadable right now.
		return Record{}, fmt.Errorf("append %s: %w: decision %s is stored at seq %d but could not be read back: %w", subject, ErrUnknownOutcome, id, seq, err)
	}
	if m.Subject != subject || m.Header.Get(jetstream.MsgIDHeader) != id {
		return Record{}, fmt.Errorf("append %s: %w: decision %s is stored at seq %d on %s",
			subject, ErrDuplicateDecisionID, id, seq, m.Subject)
	}
	return l.decode(m)
}

// lastPosition reads where the aggregate on subject stands now.
func (l *Log) lastPosition(ctx context.Context, subject string) (Position, error) {
	m, err := l.leaderGet(ctx, 0, subject)
	if errors.Is(err, nats.ErrMsgNotFound) {
		return Position{}, nil
	}
	if err != nil {
		return Position{}, err
	}
	if v, err := strconv.ParseUint(m.Header.Get(wire.HeaderLastVersion), 10, 64); err == nil && v > 0 && m.Header.Get(jetstream.MsgIDHeader) != "" {
		return Position{Seq: m.Sequence, Version: v}, nil
	}
	rec, err := decodeRaw(m)
	var de *DecodeError
	if errors.As(err, &de) {
		// A foreign message is the subject's last: the version is the last
		// decision's before it, the sequence its own.
		return l.positionBehindForeign(ctx, subject, m.Sequence)
	}
	if err != nil {
		return Position{}, err
	}
	return rec.Position(), nil
}

// positionBehindForeign reads the aggregate on subject up to seq, the
// sequence of a foreign message that is the subject's last, for the version
// of the last decision before it. It reads the whole subject: a rare path,
// taken only until the next append puts a decision last again.
func (l *Log) positionBehindForeign(ctx context.Context, subject string, seq uint64) (Position, error) {
	var t Tail
	deadline := time.Now().Add(l.cfg.AppendTimeout)
	for t.LastSeq < seq {
		t = Tail{}
		err := l.scan(ctx, subject, 1, 0, func(f Foreign) { t.LastSeq = max(t.LastSeq, f.Seq) }, func(r Record) error {
			if r.Seq < seq { // a decision after seq is newer than the position asked for
				t.Records = append(t.Records, r)
			}
			t.LastSeq = max(t.LastSeq, r.Seq)
			return nil
		})
		if err != nil {
			return Position{}, err
		}
		if t.LastSeq >= seq {
			break
		}
		if time.Now().After(deadline) { // a replica behind the leader that named seq
			return Position{}, fmt.Errorf("read %s up to seq %d: the log did not reach it within %s", subject, seq, l.cfg.AppendTimeout)
		}
		select {
		case <-ctx.Done():
			return Position{}, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	p := t.Position(Position{})
	p.Seq = seq
	return p, nil
}

// leaderGet reads one message through the stream leader: by sequence, or
// the last on subject when subject is set.
func (l *Log) leaderGet(ctx context.Context, seq uint64, subject string) (*jetstream.RawStreamMsg, error) {
	var (
		m   *nats.RawStreamMsg
		err error
	)
	if subject != "" {
		m, err = l.leader.GetLastMsg(l.names.Events, subject, nats.Context(ctx))
	} else {
		m, err = l.leader.GetMsg(l.names.Events, seq, nats.Context(ctx))
	}
	if err != nil {
		return nil, err
	}
	return &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: m.Sequence, Header: m.Header, Data: m.Data, Time: m.Time}, nil
}

// Last returns the aggregate's current position; the zero Position when it
// has no events.
func (l *Log) Last(ctx context.Context, a wire.AggregateRef) (Position, error) {
	subject, err := l.subjectOf(a)
	if err != nil {
		return Position{}, err
	}
	p, err := l.lastPosition(ctx, subject)
	if err != nil {
		return Position{}, fmt.Errorf("last position of %s: %w", subject, err)
	}
	return p, nil
}

// subjectOf is aggregate a's subject: its tokens were validated when it was
// made ([wire.NewAggregateRef]). The zero AggregateRef (a caller that made
// none) is refused as an empty aggregate type, as JetStream would time out
// on it.
func (l *Log) subjectOf(a wire.AggregateRef) (string, error) {
	if a.IsZero() {
		return "", &wire.TokenError{Field: "aggregate type", Reason: "empty"}
	}
	return l.names.SubjectOf(a), nil
}

package streams

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/esjet/esjet/internal/wire"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
)

// What the archive (internal/archive) needs of the log: an aggregate's
// messages exactly as stored, a tombstone appended under the aggregate's
// expectation, and a purge of what the tombstone stands for.
//
// A tombstone is a decision with one event, [wire.EventArchived], whose
// data is a [wire.Tombstone]. Every reader takes it as a decision with no
// command (the relay has nothing to publish, reconcile nothing to look
// for); a load stops its walk at it and folds on from the state it
// carries, so once the messages before it are purged nothing notices.

// AggregateMsgs returns the messages on aggregate typ/id's subject from
// its newest tombstone (or its first message) to its last, exactly as
// stored: what an archive of the aggregate holds.
func (l *Log) AggregateMsgs(ctx context.Context, typ, id string) ([]*jetstream.RawStreamMsg, error) {
	subject, err := l.names.AggregateSubject(typ, id)
	if err != nil {
		return nil, err
	}
	msgs, err := l.tailMsgs(ctx, subject, Position{})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", subject, err)
	}
	return msgs, nil
}

// DecodeMsg decodes one stored message as [Log.Load] does (upcasters
// applied), for a reader of archived messages.
func (l *Log) DecodeMsg(m *jetstream.RawStreamMsg) (Record, error) { return l.decode(m) }

// AppendTombstone appends t as the tombstone of aggregate typ/id, which
// must stand at at (its last archived decision): it is refused with a
// [*ConflictError] when a decision was appended since. Its decision id is
// [wire.TombstoneID], so appending it again after a lost reply returns the
// one stored.
func (l *Log) AppendTombstone(ctx context.Context, typ, id string, t wire.Tombstone, at Position) (Record, error) {
	subject, err := l.names.AggregateSubject(typ, id)
	if err != nil {
		return Record{}, err
	}
	data, err := json.Marshal(t)
	if err != nil {
		return Record{}, err
	}
	did := wire.TombstoneID(subject, at.Seq)
	d := Decision{ID: did, AggregateType: typ, AggregateID: id, CorrelationID: did,
		Events: []Event{{ID: eventID(uuid.MustParse(did), 0), Type: wire.EventArchived, Schema: 1,
			Version: at.Version + 1, Time: l.cfg.Now().UTC(), Data: data}}}
	msg, err := encode(subject, d)
	if err != nil {
		return Record{}, err
	}
	msg.Header.Set(wire.HeaderArchived, t.Archive)
	ctx, cancel := context.WithTimeout(ctx, l.cfg.AppendTimeout)
	defer cancel()
	ack, err := l.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(at.Seq))
	switch {
	case err == nil && !ack.Duplicate:
		return Record{Decision: d, Seq: ack.Sequence, Subject: subject}, nil
	case err == nil:
		return l.original(ctx, subject, did, ack.Sequence)
	case isConflict(err):
		if rec, ok, ferr := l.findAfter(ctx, subject, at.Seq, did); ferr == nil && ok {
			return rec, nil
		}
		actual, _ := l.lastPosition(ctx, subject)
		return Record{}, &ConflictError{Subject: subject, Expected: at, Actual: actual, Err: err}
	}
	return Record{}, fmt.Errorf("append tombstone %s: %w", subject, err)
}

// PurgeBefore removes the messages on aggregate typ/id's subject stored
// before sequence seq (its tombstone): a decision appended after the
// tombstone stays, however late the purge runs. It needs a stream that
// allows purges and a user allowed STREAM.PURGE (the admin role).
func (l *Log) PurgeBefore(ctx context.Context, typ, id string, seq uint64) error {
	subject, err := l.names.AggregateSubject(typ, id)
	if err != nil {
		return err
	}
	if err := l.events.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(seq)); err != nil {
		return fmt.Errorf("purge %s below seq %d: %w", subject, seq, err)
	}
	return nil
}

// CanPurge reports whether EVENTS allows purges (deny_purge off: created
// with archiving configured).
func (l *Log) CanPurge(ctx context.Context) (bool, error) {
	info, err := l.events.Info(ctx)
	if err != nil {
		return false, err
	}
	return !info.Config.DenyPurge, nil
}

// SubjectCounts returns the number of messages per aggregate subject of
// type typ (the stream's subject index; the server pages it).
func (l *Log) SubjectCounts(ctx context.Context, typ string) (map[string]uint64, error) {
	info, err := l.events.Info(ctx, jetstream.WithSubjectFilter(l.names.TypeFilter(typ)))
	if err != nil {
		return nil, err
	}
	return info.State.Subjects, nil
}

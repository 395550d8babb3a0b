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

// ProbePurge asks EVENTS to purge nothing (its messages below sequence
// 1): it succeeds when this connection's user may purge EVENTS, and fails
// when it may not (the server drops the request, which times out, and
// tells the connection; internal/archive says which).
func (l *Log) ProbePurge(ctx context.Context) error {
	return l.events.Purge(ctx, jetstream.WithPurgeSubject(l.names.EventsFilter()), jetstream.WithPurgeSequence(1))
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

// ArchiveReader returns the records a tombstone stands for, in order,
// read from its archive (and an earlier tombstone's, when the archive
// begins with one): internal/archive provides it.
type ArchiveReader func(ctx context.Context, t wire.Tombstone) ([]Record, error)

// SetArchive makes history reads ([Log.LoadPage], [Log.History]) of an
// archived aggregate fall through to its archive. Without it they show
// the tombstone as the aggregate's first decision.
func (l *Log) SetArchive(r ArchiveReader) { l.archive.Store(&r) }

// ArchiveReads counts the reads that fell through to the archive.
func (l *Log) ArchiveReads() int64 { return l.archiveReads.Load() }

// History returns the aggregate's whole history: [Log.Load] from the
// start, with an archived aggregate's decisions read from its archive
// before its tombstone.
func (l *Log) History(ctx context.Context, typ, id string) ([]Record, error) {
	recs, err := l.Load(ctx, typ, id, Position{})
	if err != nil {
		return nil, err
	}
	return l.unarchive(ctx, recs, 0)
}

// Archived returns the records tombstone rec stands for, read from its
// archive (a rebuild that replays archived history exactly). It fails
// without an archive reader ([Log.SetArchive]).
func (l *Log) Archived(ctx context.Context, rec Record) ([]Record, error) {
	r := l.archive.Load()
	if r == nil {
		return nil, fmt.Errorf("read archive of %s: no archive store is configured", rec.Subject)
	}
	t, _, err := wire.TombstoneOf(rec)
	if err != nil {
		return nil, err
	}
	l.archiveReads.Add(1)
	old, err := (*r)(ctx, t)
	if err == nil {
		err = archivedBefore(rec, t, old)
	}
	return old, err
}

// archivedBefore checks that old, what the archive holds for tombstone
// rec (t), is rec's aggregate's history right up to it: on rec's subject,
// ending at the version before the tombstone's. A tombstone is only
// written by the archive job, but anyone who may publish to EVENTS (the
// node role) could append one naming another aggregate's archive: its
// history would then show that aggregate's decisions as its own.
func archivedBefore(rec Record, t wire.Tombstone, old []Record) error {
	for _, o := range old {
		if o.Subject != rec.Subject {
			return fmt.Errorf("the archive holds a decision of %s (seq %d), not of %s: the tombstone at seq %d does not name this aggregate's archive", o.Subject, o.Seq, rec.Subject, rec.Seq)
		}
	}
	if n := len(old); n == 0 || old[n-1].LastVersion() != t.LastVersion || t.LastVersion+1 != rec.FirstVersion() {
		last := uint64(0)
		if n > 0 {
			last = old[n-1].LastVersion()
		}
		return fmt.Errorf("the archive ends at version %d, the tombstone at seq %d says %d and follows version %d", last, rec.Seq, t.LastVersion, rec.FirstVersion()-1)
	}
	return nil
}

// unarchive puts before recs the archived records their first record (a
// tombstone) stands for, those with events after version after, when
// there is an archive reader and after is before the tombstone.
func (l *Log) unarchive(ctx context.Context, recs []Record, after uint64) ([]Record, error) {
	r := l.archive.Load()
	if r == nil || len(recs) == 0 || !wire.IsTombstone(recs[0]) || after >= recs[0].FirstVersion()-1 {
		return recs, nil
	}
	t, _, err := wire.TombstoneOf(recs[0])
	if err != nil {
		return nil, err
	}
	l.archiveReads.Add(1)
	old, err := (*r)(ctx, t)
	if err == nil {
		err = archivedBefore(recs[0], t, old)
	}
	if err != nil {
		return nil, fmt.Errorf("read archive %s of %s: %w", t.Archive, recs[0].Subject, err)
	}
	out := make([]Record, 0, len(old)+len(recs))
	for _, o := range old {
		if o.LastVersion() > after {
			out = append(out, o)
		}
	}
	return append(out, recs...), nil
}

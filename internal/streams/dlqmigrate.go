package streams

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/failpoint"
	"github.com/esjet/esjet/internal/wire"
)

// An older esjet's DLQ kept several letters on one subject per kind and
// every message of a subject (wire.LegacyDeadLetterSubject). Today's keeps
// one message per subject, and the update that says so would cut each
// older subject to its newest message (purges denied or not). So
// provisioning moves the older letters first, in three steps, each of
// which a kill may interrupt and a second run finishes:
//
//  1. copy (while the DLQ still keeps every message of a subject, with
//     per-message TTLs and direct gets turned on first): each open letter
//     to its own subject (wire.MigratedLetterMsg), each settled one — an
//     older audit record names it — to its settled copy (kept for
//     dlq_settled_max_age from its settling, if that is still ahead) and
//     its audit record to today's subject. A copy is published only where
//     its subject is still empty (an expected last sequence of 0), and a
//     settled letter whose audit record was copied is done: a second run
//     copies nothing twice;
//  2. the update itself (provisionStream), only once every copy is stored;
//  3. each older subject's remaining message is replaced by a mark
//     (wire.LegacyMark) that expires in a second.
//
// A node that may not update streams (Ensure) refuses to start while an
// older subject still holds a letter or an audit record: its letters are
// not where today's readers look, and only esjet provision moves them.

// legacyDLQ is the DLQ object's migration.
type legacyDLQ struct {
	ns            string
	settledMaxAge time.Duration
}

// withLegacyDLQ sets the migration on the DLQ among objs.
func withLegacyDLQ(names Names, c ProvisionConfig, objs []Object) []Object {
	c.setDefaults()
	for i := range objs {
		if objs[i].Name == names.DLQ {
			objs[i].dlq = &legacyDLQ{ns: names.Namespace, settledMaxAge: c.DLQSettledMaxAge}
		}
	}
	return objs
}

// legacySubjects are the older subjects of the DLQ that still hold a
// letter or an audit record (not only a mark).
func (l *legacyDLQ) legacySubjects(ctx context.Context, st jetstream.Stream) (subjects []string, err error) {
	for _, filter := range []string{wire.LegacyDeadLetterFilter(l.ns), wire.LegacyAuditFilter(l.ns)} {
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			return nil, fmt.Errorf("older dead letter subjects of %s: %w", st.CachedInfo().Config.Name, err)
		}
		for subj, n := range info.State.Subjects {
			if n == 1 {
				m, err := st.GetLastMsgForSubject(ctx, subj)
				if errors.Is(err, jetstream.ErrMsgNotFound) || (err == nil && wire.IsLegacyMark(m.Header)) {
					continue // emptied, or being emptied
				}
				if err != nil {
					return nil, fmt.Errorf("last message on %s: %w", subj, err)
				}
			}
			subjects = append(subjects, subj)
		}
	}
	return subjects, nil
}

// pending says what a node that may not migrate finds: an error naming
// the older letters when there are some.
func (l *legacyDLQ) pending(ctx context.Context, st jetstream.Stream) error {
	subjects, err := l.legacySubjects(ctx, st)
	if err != nil || len(subjects) == 0 {
		return err
	}
	return &StreamConfigError{Stream: st.CachedInfo().Config.Name, Diffs: []Diff{{Field: "older dead letters",
		Have: fmt.Sprintf("%d subject(s) like %s", len(subjects), subjects[0]), Want: "one subject per letter", Kind: DiffNeeded,
		Why: "letters of an older esjet, which today's readers do not see until esjet provision moves them"}}}
}

// copyLetters is step 1 on the DLQ st as have configures it: it returns
// how many letters it copied.
func (l *legacyDLQ) copyLetters(ctx context.Context, js jetstream.JetStream, st jetstream.Stream, have jetstream.StreamConfig) (int, error) {
	if !have.AllowMsgTTL || !have.AllowDirect {
		upd := have
		upd.AllowMsgTTL, upd.AllowDirect = true, true
		if _, err := js.UpdateStream(ctx, upd); err != nil {
			return 0, fmt.Errorf("turn on per-message TTLs and direct gets on %s before moving its older letters: %w", have.Name, err)
		}
	}
	sc := NewScanner(js, have.Name, 0)
	defer func() { _ = sc.Close() }()
	type audit struct {
		m   *jetstream.RawStreamMsg
		rec wire.LegacyAudit
	}
	audits := map[uint64]audit{}
	if _, err := sc.Scan(ctx, ScanRange{Filter: wire.LegacyAuditFilter(l.ns), ToLeaderLast: true}, func(m *jetstream.RawStreamMsg) error {
		if rec, ok := wire.DecodeLegacyAudit(m.Data); ok && !wire.IsLegacyMark(m.Header) {
			if _, seen := audits[rec.DLQSeq]; !seen {
				audits[rec.DLQSeq] = audit{m, rec}
			}
		}
		return nil
	}); err != nil {
		return 0, err
	}
	copied := 0
	_, err := sc.Scan(ctx, ScanRange{Filter: wire.LegacyDeadLetterFilter(l.ns), ToLeaderLast: true}, func(m *jetstream.RawStreamMsg) error {
		if wire.IsLegacyMark(m.Header) {
			return nil
		}
		a, settled := audits[m.Sequence]
		var err error
		if settled {
			err = l.copySettled(ctx, js, st, m, a.m, a.rec)
		} else {
			err = l.publishOnce(ctx, js, wire.MigratedLetterMsg(l.ns, m), 0)
		}
		if err != nil {
			return fmt.Errorf("move the older dead letter at %d: %w", m.Sequence, err)
		}
		copied++
		failpoint.Hit(failpoint.DLQMigrateCopy)
		return nil
	})
	return copied, err
}

// copySettled copies the settled letter m and its audit record a: the
// letter first, so an audit record on today's subject says both are there.
func (l *legacyDLQ) copySettled(ctx context.Context, js jetstream.JetStream, st jetstream.Stream, m, a *jetstream.RawStreamMsg, rec wire.LegacyAudit) error {
	am := wire.MigratedAuditMsg(l.ns, wire.DecodeDeadLetter(m).Kind, a, rec)
	if _, err := st.GetLastMsgForSubject(ctx, am.Subject); err == nil {
		return nil // moved by an earlier run
	} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return err
	}
	if left := l.settledMaxAge - time.Since(a.Time); left >= time.Second {
		if err := l.publishOnce(ctx, js, wire.SettledMsg(l.ns, m, rec.Action), left.Round(time.Second)); err != nil {
			return err
		}
	}
	return l.publishOnce(ctx, js, am, 0)
}

// publishOnce publishes m where its subject holds nothing yet (with a TTL
// when ttl > 0); a subject that holds a message already is done.
func (l *legacyDLQ) publishOnce(ctx context.Context, js jetstream.JetStream, m *nats.Msg, ttl time.Duration) error {
	opts := []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(0)}
	if ttl > 0 {
		opts = append(opts, jetstream.WithMsgTTL(ttl))
	}
	_, err := js.PublishMsg(ctx, m, opts...)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("copy to %s: %w", m.Subject, err)
	}
	return nil
}

// markLegacy is step 3, on a DLQ that keeps one message per subject: each
// older subject's message is replaced by a mark that expires.
func (l *legacyDLQ) markLegacy(ctx context.Context, js jetstream.JetStream, st jetstream.Stream) (int, error) {
	subjects, err := l.legacySubjects(ctx, st)
	if err != nil {
		return 0, err
	}
	for _, subj := range subjects {
		if _, err := js.PublishMsg(ctx, wire.LegacyMark(subj), jetstream.WithMsgTTL(wire.SettleMarkTTL)); err != nil {
			return 0, fmt.Errorf("empty the older subject %s: %w", subj, err)
		}
	}
	return len(subjects), nil
}

// provision is provisionStream for the DLQ st, whose differences from o's
// configuration are diffs: the older letters moved (step 1), the update
// (step 2), the older subjects emptied (step 3), each step reported among
// the change's fields.
func (l *legacyDLQ) provision(ctx context.Context, js jetstream.JetStream, st jetstream.Stream, o Object, diffs []Diff, mode ApplyMode) (Change, error) {
	have, want := st.CachedInfo().Config, o.Config
	legacy, err := l.legacySubjects(ctx, st)
	if err != nil {
		return Change{}, err
	}
	var done []string
	if mode == PlanOnly {
		if len(legacy) > 0 {
			done = append(done, fmt.Sprintf("older dead letters: %d subject(s) → one subject per letter", len(legacy)))
		}
		if len(diffs)+len(done) == 0 {
			return Change{Name: o.Name, Action: "unchanged"}, nil
		}
		return Change{Name: o.Name, Action: "update", Fields: append(done, fields(diffs)...)}, nil
	}
	if len(legacy) > 0 && have.MaxMsgsPerSubject != 1 {
		n, err := l.copyLetters(ctx, js, st, have)
		if err != nil {
			return Change{}, fmt.Errorf("%s: %w (nothing was cut: run esjet provision again)", have.Name, err)
		}
		done = append(done, fmt.Sprintf("older dead letters: %d moved to one subject each", n))
		if st, err = lookupStream(ctx, js, have.Name); err != nil {
			return Change{}, fmt.Errorf("look up stream %s: %w", have.Name, err)
		}
		have = st.CachedInfo().Config
		diffs = diffStream(have, want)
	}
	if len(diffs) > 0 {
		if _, err := js.UpdateStream(ctx, updated(have, want)); err != nil {
			return Change{}, fmt.Errorf("update stream %s (%s): %w", want.Name, strings.Join(fields(diffs), "; "), err)
		}
		failpoint.Hit(failpoint.DLQMigrateUpdated)
	}
	if len(legacy) > 0 && want.MaxMsgsPerSubject == 1 {
		n, err := l.markLegacy(ctx, js, st)
		if err != nil {
			return Change{}, err
		}
		if n > 0 {
			done = append(done, fmt.Sprintf("older subjects: %d emptied", n))
		}
	}
	if len(diffs)+len(done) == 0 {
		return Change{Name: o.Name, Action: "unchanged"}, nil
	}
	return Change{Name: o.Name, Action: "updated", Fields: append(done, fields(diffs)...)}, nil
}

package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/failpoint"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Rule says when an aggregate of one type is closed for good: one of its
// decisions recorded an event of a type in ClosedBy, and its last
// decision is older than After.
type Rule struct {
	ClosedBy []string
	After    time.Duration
}

// StateFunc gives the state a tombstone carries for aggregate typ/id
// standing at at (sealed as a snapshot is), its schema, and how many
// reported commands still await their outcome; a nil state for a type
// without one (a raw type). It fails when the aggregate is not at at.
// aggregate.Repository.ArchiveState is one.
type StateFunc func(ctx context.Context, typ, id string, at wire.Position) (state json.RawMessage, schema, outstanding int, err error)

// Config is what an [Archiver] archives.
type Config struct {
	// Rules are the aggregate types to archive, by type. Empty: nothing.
	Rules map[string]Rule
	// ReceiptsMaxAge is streams.receipts_max_age: a command older than it
	// without a receipt counts as settled (its receipt expired). Zero:
	// receipts are kept, a missing one means not settled.
	ReceiptsMaxAge time.Duration
	// Limit stops a run after that many aggregates archived; 0: no limit.
	Limit int
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// DropSnapshot removes an archived aggregate's snapshot (the
	// tombstone carries its state): aggregate.Repository.DropSnapshot.
	// It runs after the tombstone is appended and before the purge, so a
	// pass that finds a tombstone not yet purged drops it again. Nil:
	// snapshots are left (a test without a snapshots bucket).
	DropSnapshot func(ctx context.Context, typ, id string) error
}

// ErrPurgeDenied is returned by [Archiver.Run] when EVENTS denies purges:
// it was created before archiving was configured (JetStream cannot turn
// deny_purge off), see docs/archiving.md.
var ErrPurgeDenied = errors.New("archive: the event log denies purges")

// Archiver runs archive passes over the log (see the package doc).
type Archiver struct {
	js     jetstream.JetStream
	log    *streams.Log
	store  Store
	state  StateFunc
	cfg    Config
	logger *slog.Logger
}

// New returns an archiver of log's namespace into store. js must be
// allowed to purge EVENTS (the admin role).
func New(js jetstream.JetStream, log *streams.Log, store Store, state StateFunc, cfg Config, logger *slog.Logger) *Archiver {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Archiver{js: js, log: log, store: store, state: state, cfg: cfg, logger: logger.With("component", "archive")}
}

// SetLimit stops each later run after n aggregates archived (0: none).
func (a *Archiver) SetLimit(n int) { a.cfg.Limit = n }

// Progress is what a run has done so far.
type Progress struct {
	Type      string `json:"type"`      // the type being walked
	Total     int    `json:"total"`     // aggregates of the rules' types in the log
	Seen      int    `json:"seen"`      // of them, looked at
	Archived  int    `json:"archived"`  // archived by this run
	Finished  int    `json:"finished"`  // archived before, whose purge this run finished
	Already   int    `json:"already"`   // archived before, nothing left to do
	Open      int    `json:"open"`      // not closed, or closed too recently
	Unsettled int    `json:"unsettled"` // closed, but a command is not relayed or settled
	Aborted   int    `json:"aborted"`   // a decision came while archiving: left as it was
	Decisions int    `json:"decisions"` // decisions moved to the archive
	Bytes     int64  `json:"bytes"`     // their size in the log
}

// outcome of one aggregate.
type outcome int

const (
	archived outcome = iota
	finished
	already
	open
	unsettled
	aborted
)

// Run makes one pass: every aggregate of the rules' types that is closed
// and settled is archived. It resumes whatever an earlier pass left half
// done. progress, when not nil, is called after each aggregate.
func (a *Archiver) Run(ctx context.Context, progress func(Progress)) (Progress, error) {
	var p Progress
	if len(a.cfg.Rules) == 0 {
		return p, nil
	}
	ok, err := a.log.CanPurge(ctx)
	if err != nil {
		return p, err
	}
	if !ok {
		return p, fmt.Errorf("%w: %s was created before archiving was configured, and JetStream cannot allow purges on it afterwards; see docs/archiving.md", ErrPurgeDenied, a.log.Names().Events)
	}
	if err := a.mayPurge(ctx); err != nil {
		return p, err
	}
	env, err := a.environment(ctx)
	if err != nil {
		return p, err
	}
	types := make([]string, 0, len(a.cfg.Rules))
	counts := map[string]map[string]uint64{}
	for typ := range a.cfg.Rules {
		types = append(types, typ)
		c, err := a.log.SubjectCounts(ctx, typ)
		if err != nil {
			return p, fmt.Errorf("list aggregates of %s: %w", typ, err)
		}
		counts[typ] = c
		p.Total += len(c)
	}
	slices.Sort(types)
	for _, typ := range types {
		p.Type = typ
		prefix := a.log.Names().TypePrefix(typ)
		subjects := make([]string, 0, len(counts[typ]))
		for s := range counts[typ] {
			subjects = append(subjects, s)
		}
		slices.Sort(subjects)
		for _, subj := range subjects {
			if err := ctx.Err(); err != nil {
				return p, err
			}
			id := strings.TrimPrefix(subj, prefix)
			o, n, size, err := a.one(ctx, env, typ, id, counts[typ][subj])
			if err != nil {
				return p, fmt.Errorf("archive %s/%s: %w", typ, id, err)
			}
			p.Seen++
			switch o {
			case archived:
				p.Archived++
				p.Decisions += n
				p.Bytes += size
			case finished:
				p.Finished++
			case already:
				p.Already++
			case open:
				p.Open++
			case unsettled:
				p.Unsettled++
			case aborted:
				p.Aborted++
			}
			if progress != nil {
				progress(p)
			}
			if a.cfg.Limit > 0 && p.Archived >= a.cfg.Limit {
				return p, nil
			}
		}
	}
	return p, nil
}

// one archives aggregate typ/id if it is closed and settled, or finishes
// what an earlier pass left. count is its messages in the log.
func (a *Archiver) one(ctx context.Context, env *environment, typ, id string, count uint64) (outcome, int, int64, error) {
	msgs, err := a.log.AggregateMsgs(ctx, typ, id)
	if err != nil || len(msgs) == 0 {
		return open, 0, 0, err
	}
	recs := make([]streams.Record, 0, len(msgs))
	for _, m := range msgs {
		r, err := a.log.DecodeMessage(m)
		if err != nil {
			// A foreign message or one this build cannot read: an archive
			// must read back as what it was, so leave the aggregate.
			a.logger.Warn("not archived: a message on its subject does not decode", "aggregate_type", typ, "aggregate_id", id, "seq", m.Sequence, "error", err)
			return open, 0, 0, nil
		}
		recs = append(recs, r)
	}
	last := recs[len(recs)-1]
	if wire.IsTombstone(last) {
		if count <= 1 {
			return already, 0, 0, nil
		}
		// A pass was cut between the tombstone and the purge.
		if err := a.dropSnapshot(ctx, typ, id); err != nil {
			return 0, 0, 0, err
		}
		return finished, 0, 0, a.log.PurgeBefore(ctx, typ, id, last.Seq)
	}
	rule := a.cfg.Rules[typ]
	closedBy := ""
	for _, r := range recs {
		for _, e := range r.Events {
			if slices.Contains(rule.ClosedBy, e.Type) {
				closedBy = e.Type
			}
		}
	}
	now := a.cfg.Now()
	if closedBy == "" || now.Sub(last.Stored) < rule.After {
		return open, 0, 0, nil
	}
	commands, settled, err := a.settled(ctx, env, recs, now)
	if err != nil || !settled {
		return unsettled, 0, 0, err
	}
	state, schema, outstanding, err := a.state(ctx, typ, id, last.Position())
	if errors.Is(err, ErrMoved) {
		return aborted, 0, 0, nil
	}
	if err != nil {
		return 0, 0, 0, fmt.Errorf("state: %w", err)
	}
	if outstanding > 0 {
		return unsettled, 0, 0, nil
	}
	obj := Object{Namespace: a.log.Names().Namespace, Subject: msgs[0].Subject, AggregateType: typ, AggregateID: id,
		FirstSeq: msgs[0].Sequence, LastSeq: last.Seq, LastVersion: last.LastVersion(), Archived: now.UTC()}
	t := wire.Tombstone{Store: a.store.Where(), FirstSeq: msgs[0].Sequence, LastSeq: last.Seq, LastVersion: last.LastVersion(),
		Commands: commands, State: state, StateSchema: schema, ClosedBy: closedBy}
	for i, m := range msgs {
		obj.Messages = append(obj.Messages, MessageOf(m))
		t.Bytes += int64(len(m.Data))
		for k, v := range m.Header {
			for _, s := range v {
				t.Bytes += int64(len(k) + len(s))
			}
		}
		if prev, ok, _ := wire.TombstoneOf(recs[i]); ok && i == 0 {
			t.Previous = prev.Archive
			continue
		}
		t.Decisions++
		t.Events += len(recs[i].Events)
	}
	data, err := Encode(&obj)
	if err != nil {
		return 0, 0, 0, err
	}
	t.Archive = wire.ArchiveObjectName(typ, id, last.Seq)
	if err := a.store.Put(ctx, t.Archive, data); err != nil {
		return 0, 0, 0, err
	}
	back, err := a.store.Get(ctx, t.Archive)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("read back %s: %w", t.Archive, err)
	}
	if !bytes.Equal(back, data) {
		return 0, 0, 0, fmt.Errorf("read back %s: %d bytes differ from the %d written", t.Archive, len(back), len(data))
	}
	if _, err := Decode(back); err != nil {
		return 0, 0, 0, err
	}
	sum := sha256.Sum256(data)
	t.SHA256 = hex.EncodeToString(sum[:])
	failpoint.Hit(failpoint.ArchiveAfterPut)
	tomb, err := a.log.AppendTombstone(ctx, typ, id, t, last.Position())
	var conflict *streams.ConflictError
	if errors.As(err, &conflict) {
		a.logger.Info("not archived: a decision came while archiving", "aggregate_type", typ, "aggregate_id", id, "error", err)
		return aborted, 0, 0, nil
	}
	if err != nil {
		return 0, 0, 0, err
	}
	failpoint.Hit(failpoint.ArchiveAfterTombstone)
	if err := a.dropSnapshot(ctx, typ, id); err != nil {
		return 0, 0, 0, err
	}
	if err := a.log.PurgeBefore(ctx, typ, id, tomb.Seq); err != nil {
		return 0, 0, 0, err
	}
	a.logger.Debug("archived", "aggregate_type", typ, "aggregate_id", id, "archive", t.Archive, "decisions", t.Decisions, "seq", tomb.Seq)
	return archived, t.Decisions, t.Bytes, nil
}

func (a *Archiver) dropSnapshot(ctx context.Context, typ, id string) error {
	if a.cfg.DropSnapshot == nil {
		return nil
	}
	return a.cfg.DropSnapshot(ctx, typ, id)
}

// mayPurge fails with [ErrNotAllowed] when this connection's user may
// not purge EVENTS: before anything is written (a tombstone appended by a
// user that then may not purge below it would wait for an admin's pass).
func (a *Archiver) mayPurge(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := a.log.ProbePurge(pctx)
	if err == nil || ctx.Err() != nil {
		return ctx.Err()
	}
	// The server drops a request its user may not make (it times out)
	// and tells the connection, whose last error then names the subject.
	if last := a.js.Conn().LastError(); errors.Is(err, nats.ErrPermissionViolation) ||
		last != nil && errors.Is(last, nats.ErrPermissionViolation) && strings.Contains(last.Error(), "STREAM.PURGE") {
		return fmt.Errorf("%w %s (only the admin role may): %w", ErrNotAllowed, a.log.Names().Events, err)
	}
	return fmt.Errorf("check that %s may be purged: %w", a.log.Names().Events, err)
}

// ErrMoved is what a [StateFunc] wraps when the aggregate is not where
// the archive found it: the archive of it is abandoned for this pass.
var ErrMoved = errors.New("archive: the aggregate moved")

package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Incremental reconciliation.
//
// A run ends by writing a checkpoint to the object store <ns>_reconcile:
// how far it read each stream, the counts of the commands it settled for
// good, and the commands still open (in flight, scheduled, dead, failed,
// orphaned, not yet relayed, not yet told their outcome). The next run
// starts from there: it reads only the messages stored since, plus the
// open commands, so its time and memory follow what changed and what is
// open, not the log.
//
// A command is settled for good when nothing but a new message could
// change how it is counted: relayed, exactly one copy in OUTBOX, a receipt
// that says done, its outcome recorded on its aggregate when it asked for
// one, never dead or told it failed — or expired (aged out of OUTBOX with
// no outcome). A later message about a settled command (a second copy, a
// second outcome, a new receipt or dead letter) makes the run start over
// as a full one, which says exactly what happened: a checkpoint never hides
// drift. So does anything the checkpoint cannot account for — a stream
// re-created, OUTBOX having aged out messages the checkpoint had not read,
// the receipts purged. Messages deleted from OUTBOX since (esjet never
// deletes any; an operator might) are found by checking that the open
// commands' copies are still there.
//
// One thing drifts by design: a settled command stays counted "in outbox"
// after OUTBOX ages its copy out. A full run (--full) counts what is there.

// CheckpointMode says how a run uses the checkpoint.
type CheckpointMode int

const (
	// CheckpointIncremental starts from the last run's checkpoint, when
	// there is a usable one, and writes a new one.
	CheckpointIncremental CheckpointMode = iota
	// CheckpointFull reads everything and writes a new checkpoint.
	CheckpointFull
	// CheckpointOff reads everything and neither reads nor writes one.
	CheckpointOff
)

// CheckpointInfo says how a run used checkpoints.
type CheckpointInfo struct {
	// Incremental: the run started from a checkpoint, taken at From.
	Incremental bool  `json:"incremental"`
	From        Marks `json:"from,omitzero"`
	// FullBecause says why a run read everything.
	FullBecause string `json:"full_because,omitempty"`
	// Open is how many commands the run left open (in its checkpoint).
	Open int `json:"open"`
	// PeakHeld is the most commands the run held in memory at once (at
	// the end of a chunk): the open ones and one chunk's, not the log's.
	PeakHeld int `json:"peak_held"`
	// Saved: the run wrote its checkpoint; else SaveError says why not.
	Saved     bool   `json:"saved"`
	SaveError string `json:"save_error,omitempty"`
}

// Marks are the last sequences of the streams a checkpoint covers.
type Marks struct {
	Events   uint64 `json:"events"`
	Outbox   uint64 `json:"outbox"`
	DLQ      uint64 `json:"dlq"`
	Receipts uint64 `json:"receipts"`
}

// errTouchedClosed: a message about a command a checkpoint settled.
var errTouchedClosed = errors.New("a command the checkpoint had settled changed")

// checkpointVersion is the version of the checkpoint's shape.
const checkpointVersion = 1

// checkpointObject is the checkpoint's name in the object store.
const checkpointObject = "checkpoint"

// mark is one stream as a run bounded it.
type mark struct {
	Last    uint64    `json:"last"`
	First   uint64    `json:"first"`
	Msgs    uint64    `json:"msgs"`
	Deleted int       `json:"deleted"`
	Created time.Time `json:"created"`
}

// markOf reads st's cached state; a missing stream is the zero mark.
func markOf(st jetstream.Stream) mark {
	if st == nil {
		return mark{}
	}
	info := st.CachedInfo()
	return mark{Last: info.State.LastSeq, First: info.State.FirstSeq, Msgs: info.State.Msgs, Deleted: info.State.NumDeleted, Created: info.Created}
}

// bounds are the four streams' marks.
type bounds struct{ events, outbox, dlq, receipts mark }

type checkpoint struct {
	V           int               `json:"v"`
	Events      mark              `json:"events"`
	Outbox      mark              `json:"outbox"`
	DLQ         mark              `json:"dlq"`
	Receipts    mark              `json:"receipts"`
	Undecodable uint64            `json:"undecodable"`
	Closed      map[string]Counts `json:"closed"`
	Open        []savedEntry      `json:"open"`
	// Unsettled are the open dead letters: DLQ sequence → command id.
	Unsettled map[uint64]string `json:"unsettled"`
}

func (c *checkpoint) bounds() bounds {
	return bounds{events: c.Events, outbox: c.Outbox, dlq: c.DLQ, receipts: c.Receipts}
}

func (b bounds) marks() Marks {
	return Marks{Events: b.events.Last, Outbox: b.outbox.Last, DLQ: b.dlq.Last, Receipts: b.receipts.Last}
}

type savedEntry struct {
	ID          string   `json:"id"`
	Kind        string   `json:"kind"`
	DecisionSeq uint64   `json:"dseq,omitempty"`
	DueAt       int64    `json:"due,omitempty"`
	Copies      int      `json:"copies,omitempty"`
	Seqs        []uint64 `json:"seqs,omitempty"`
	LastSeq     uint64   `json:"last_seq,omitempty"`
	LastAt      int64    `json:"last_at,omitempty"`
	Scheduled   bool     `json:"scheduled,omitempty"`
	SchedSeq    uint64   `json:"sched_seq,omitempty"`
	Dead        bool     `json:"dead,omitempty"`
	Discarded   bool     `json:"discarded,omitempty"`
	Outcome     string   `json:"outcome,omitempty"`
	ToldFailed  bool     `json:"told_failed,omitempty"`
	Report      bool     `json:"report,omitempty"`
	Reported    bool     `json:"reported,omitempty"`
	Refused     string   `json:"refused,omitempty"`
}

func newCheckpoint(b bounds, s *scan, closed map[string]Counts, undecodable uint64) *checkpoint {
	cp := &checkpoint{V: checkpointVersion, Events: b.events, Outbox: b.outbox, DLQ: b.dlq, Receipts: b.receipts,
		Undecodable: undecodable, Closed: closed, Open: make([]savedEntry, 0, len(s.entries)), Unsettled: map[uint64]string{}}
	ids := make(map[*entry]string, len(s.unsettled))
	for id, e := range s.entries {
		cp.Open = append(cp.Open, savedEntry{ID: id, Kind: e.kind, DecisionSeq: e.decisionSeq, DueAt: e.dueAt,
			Copies: e.copies, Seqs: e.seqs, LastSeq: e.lastSeq, LastAt: e.lastAt, Scheduled: e.scheduled, SchedSeq: e.schedSeq,
			Dead: e.dead, Discarded: e.discarded, Outcome: e.outcome, ToldFailed: e.toldFailed, Report: e.report, Reported: e.reported, Refused: e.refused})
		ids[e] = id
	}
	for seq, e := range s.unsettled {
		if id, ok := ids[e]; ok {
			cp.Unsettled[seq] = id
		}
	}
	return cp
}

// restore makes s start from cp: its open commands, its dead letters.
func (s *scan) restore(cp *checkpoint) {
	s.incremental = true
	s.settledThrough = cp.Events.Last
	for _, o := range cp.Open {
		s.entries[o.ID] = &entry{kind: s.kind(o.Kind), decisionSeq: o.DecisionSeq, dueAt: o.DueAt, copies: o.Copies,
			seqs: o.Seqs, lastSeq: o.LastSeq, lastAt: o.LastAt, scheduled: o.Scheduled, schedSeq: o.SchedSeq, dead: o.Dead,
			discarded: o.Discarded, outcome: o.Outcome, toldFailed: o.ToldFailed, report: o.Report, reported: o.Reported, refused: o.Refused}
	}
	for seq, id := range cp.Unsettled {
		if e := s.entries[id]; e != nil {
			s.unsettled[seq] = e
		}
	}
}

// touched returns errTouchedClosed when an incremental run meets a message
// about id that is no open command's and was issued in the log the
// checkpoint covered: a command it settled. Another id is new (issued
// since, or published by a producer outside esjet).
func (s *scan) touched(ctx context.Context, id, format string, args ...any) error {
	if !s.incremental || s.entries[id] != nil || s.checked[id] {
		return nil
	}
	ref, err := wire.ParseCommandID(id)
	if err != nil {
		return nil // not an esjet command id: never issued by the log
	}
	if s.log == nil {
		return fmt.Errorf("reconcile: no log to look up %s in", id)
	}
	recs, err := s.log.Load(ctx, ref.AggregateType, ref.AggregateID, streams.Position{})
	if err != nil {
		return fmt.Errorf("reconcile: look up %s: %w", id, err)
	}
	for _, rec := range recs {
		if rec.Seq > s.settledThrough {
			break
		}
		for _, c := range rec.Commands {
			if c.ID == id {
				return fmt.Errorf("%w: %s (%s)", errTouchedClosed, id, fmt.Sprintf(format, args...))
			}
		}
	}
	if s.checked == nil {
		s.checked = map[string]bool{}
	}
	s.checked[id] = true
	return nil
}

// closable says whether an entry, counted as c, is settled for good.
func closable(e *entry, c Counts, ackFloor uint64) bool {
	if c.Expired == 1 {
		return true
	}
	return c.Completed == 1 && e.copies == 1 && !e.scheduled && !e.dead && !e.discarded && !e.toldFailed &&
		e.decisionSeq > 0 && e.decisionSeq <= ackFloor && (!e.report || e.reported)
}

// loadCheckpoint returns the last run's checkpoint when it can be the start
// of this one (else nil and why not).
func (r *Reconciler) loadCheckpoint(ctx context.Context, b bounds, receiptsExpire bool) (*checkpoint, string, error) {
	data, err := r.readCheckpoint(ctx)
	if err != nil || data == nil {
		return nil, "no checkpoint yet", err
	}
	var cp checkpoint
	if err := json.Unmarshal(data, &cp); err != nil || cp.V != checkpointVersion {
		return nil, fmt.Sprintf("the checkpoint is unreadable or of another version (%v)", err), nil
	}
	for _, s := range []struct {
		name      string
		have, was mark
	}{{r.names.Events, b.events, cp.Events}, {r.names.Outbox, b.outbox, cp.Outbox}, {r.names.DLQ, b.dlq, cp.DLQ}, {wire.KVStream(r.names.Receipts), b.receipts, cp.Receipts}} {
		switch {
		case !s.have.Created.Equal(s.was.Created):
			return nil, fmt.Sprintf("%s was created anew since the checkpoint", s.name), nil
		case s.have.Last < s.was.Last:
			return nil, fmt.Sprintf("%s ends at seq %d, before the checkpoint's %d", s.name, s.have.Last, s.was.Last), nil
		}
	}
	switch {
	case b.outbox.First > cp.Outbox.Last+1:
		return nil, fmt.Sprintf("%s aged out messages the checkpoint had not read (it starts at seq %d, the checkpoint read to %d)", r.names.Outbox, b.outbox.First, cp.Outbox.Last), nil
	case b.dlq.First > cp.DLQ.Last+1:
		return nil, fmt.Sprintf("%s lost messages the checkpoint had not read", r.names.DLQ), nil
	case b.receipts.Msgs < cp.Receipts.Msgs && !receiptsExpire: // expired receipts were of settled or expired commands
		return nil, fmt.Sprintf("the receipts bucket holds %d receipts, fewer than the checkpoint's %d (purged?)", b.receipts.Msgs, cp.Receipts.Msgs), nil
	}
	if cp.Closed == nil {
		cp.Closed = map[string]Counts{}
	}
	return &cp, "", nil
}

// readCheckpoint returns the stored checkpoint, nil when there is none.
func (r *Reconciler) readCheckpoint(ctx context.Context) ([]byte, error) {
	if f := r.cfg.CheckpointFile; f != "" {
		data, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reconcile: read checkpoint file: %w", err)
		}
		return data, nil
	}
	store, err := r.js.ObjectStore(ctx, wire.ReconcileBucket(r.names.Namespace))
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reconcile: checkpoint store %s: %w", wire.ReconcileBucket(r.names.Namespace), err)
	}
	data, err := store.GetBytes(ctx, checkpointObject)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reconcile: read checkpoint from %s: %w", wire.ReconcileBucket(r.names.Namespace), err)
	}
	return data, nil
}

// saveCheckpoint writes cp, creating the object store (or the file's
// directory) on first use.
func (r *Reconciler) saveCheckpoint(ctx context.Context, cp *checkpoint) error {
	data, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	if f := r.cfg.CheckpointFile; f != "" {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			return fmt.Errorf("reconcile: checkpoint file: %w", err)
		}
		tmp := f + ".tmp"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			return fmt.Errorf("reconcile: write checkpoint file: %w", err)
		}
		if err := os.Rename(tmp, f); err != nil {
			return fmt.Errorf("reconcile: write checkpoint file: %w", err)
		}
		return nil
	}
	bucket := wire.ReconcileBucket(r.names.Namespace)
	store, err := r.js.ObjectStore(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		replicas := 1
		if st, err := r.js.Stream(ctx, r.names.Events); err == nil {
			replicas = st.CachedInfo().Config.Replicas
		}
		store, err = r.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket: bucket, Description: "esjet reconcile checkpoint: what `esjet reconcile` has proven, and what it left open",
			Storage: jetstream.FileStorage, Replicas: replicas, Compression: true,
		})
	}
	if err != nil {
		return fmt.Errorf("reconcile: checkpoint store %s: %w", bucket, err)
	}
	if _, err := store.PutBytes(ctx, checkpointObject, data); err != nil {
		return fmt.Errorf("reconcile: write checkpoint to %s: %w", bucket, err)
	}
	return nil
}

// verifyOpen drops the OUTBOX copies and schedules of open commands that
// are gone since the checkpoint: aged out (before the stream's first
// sequence) or deleted (looked up, only when the stream has deleted any).
func (r *Reconciler) verifyOpen(ctx context.Context, s *scan, outbox jetstream.Stream, b bounds) error {
	exists := func(seq uint64) (bool, error) {
		if seq < b.outbox.First {
			return false, nil
		}
		if b.outbox.Deleted == 0 {
			return true, nil
		}
		_, err := outbox.GetMsg(ctx, seq)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("reconcile: check OUTBOX seq %d: %w", seq, err)
		}
		return true, nil
	}
	for _, e := range s.entries {
		if e.scheduled && e.schedSeq > 0 {
			ok, err := exists(e.schedSeq)
			if err != nil {
				return err
			}
			e.scheduled = ok
		}
		if len(e.seqs) == 0 {
			continue
		}
		kept := e.seqs[:0]
		for _, seq := range e.seqs {
			ok, err := exists(seq)
			if err != nil {
				return err
			}
			if ok {
				kept = append(kept, seq)
			}
		}
		e.seqs, e.copies = kept, len(kept)
	}
	return nil
}

// addClosed adds the settled commands' counts to the report's.
func addClosed(rep *Report, closed map[string]Counts) {
	for k, n := range closed {
		c := rep.Kinds[k]
		c.add(n)
		rep.Kinds[k] = c
	}
}

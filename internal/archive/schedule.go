package archive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/wire"
)

// Periodic passes (archive.every), one node of a fleet at a time.
//
// Every node configured with archive.every runs a [Schedule]. They share
// one record, key archive.pass of the workers' bucket ([PassRecord]): a
// node takes a pass by a compare-and-set of the record when the last pass
// ended `every` ago, or when the node running one stopped heartbeating
// for the lease TTL (killed mid-pass). While its pass runs it renews the
// record every third of the TTL, and a node that finds the record taken
// from under it (it stalled past the TTL) cancels its pass. At the end it
// clears the owner and records the result. This is the projection
// runner's partition lease (projection.Runner.acquire) on one key.
//
// A pass cut by a kill is resumed by the next node to take the record,
// at once: [Archiver.Run] finishes the purge of an aggregate whose
// tombstone it finds, and writes again the object of one whose tombstone
// never came.
//
// A node whose NATS user may not purge EVENTS (the node role) cannot
// archive: its pass fails with [ErrNotAllowed] before touching anything,
// it gives the record back for a node that may, says so once in its log
// and in [Schedule.Status], and tries again after `every`.

// PassLeaseTTL is how long a node's hold on the pass record lasts without
// a heartbeat: a pass cut by a kill is taken over this long after.
const PassLeaseTTL = 30 * time.Second

// PassRecord is the value of [wire.ArchivePassKey]: who runs a pass now,
// and what the last one did.
type PassRecord struct {
	Owner     string    `json:"owner,omitempty"`    // the node running a pass, "" between passes
	Heartbeat time.Time `json:"heartbeat,omitzero"` // the owner's last renewal
	Started   time.Time `json:"started,omitzero"`   // when the owner's pass began
	Progress  *Progress `json:"progress,omitempty"` // the running pass, as of the heartbeat
	Ended     time.Time `json:"ended,omitzero"`     // when the last pass ended
	By        string    `json:"by,omitempty"`       // the node that ran it
	Last      *Progress `json:"last,omitempty"`     // what it did
	Error     string    `json:"error,omitempty"`    // why it stopped early, if it did
	Resumed   bool      `json:"resumed,omitempty"`  // it took over a pass cut by a kill
	CutBy     string    `json:"cut_by,omitempty"`   // that pass's node
	CutAt     time.Time `json:"cut_at,omitzero"`    // that pass's last heartbeat
}

// running says whether rec's owner holds it at now.
func (rec PassRecord) running(now time.Time, ttl time.Duration) bool {
	return rec.Owner != "" && now.Sub(rec.Heartbeat) < ttl
}

// ErrNotAllowed is returned by [Archiver.Run] when the connection's user
// may not purge EVENTS (only the admin role may).
var ErrNotAllowed = errors.New("archive: this NATS user may not purge the event log")

// PassFunc runs one archive pass ([Archiver.Run] on a fresh archiver).
type PassFunc func(ctx context.Context, progress func(Progress)) (Progress, error)

// ScheduleConfig says how often a [Schedule] archives.
type ScheduleConfig struct {
	// Every is how long after the end of a pass the next one starts
	// (archive.every). Zero: never (Run returns at once).
	Every time.Duration
	// NodeID names this node in the record. Required.
	NodeID string
	// LeaseTTL is [PassLeaseTTL] when zero.
	LeaseTTL time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Schedule runs archive passes every so often, one node of the fleet at a
// time (see above). Its methods are safe for concurrent use.
type Schedule struct {
	kv     jetstream.KeyValue
	pass   PassFunc
	cfg    ScheduleConfig
	logger *slog.Logger

	mu       sync.Mutex
	denied   error     // the last pass was not allowed on this node
	deniedAt time.Time // when
}

// NewSchedule returns a schedule of pass, keeping its record in kv (the
// namespace's workers bucket).
func NewSchedule(kv jetstream.KeyValue, pass PassFunc, cfg ScheduleConfig, logger *slog.Logger) *Schedule {
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = PassLeaseTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Schedule{kv: kv, pass: pass, cfg: cfg, logger: logger.With("component", "archive")}
}

// Run checks whether a pass is due every third of the lease TTL (or every
// Every, when shorter) and runs it when this node takes it, until ctx
// ends. It returns nil then; a failed pass is logged and recorded, not
// returned.
func (s *Schedule) Run(ctx context.Context) error {
	if s.cfg.Every <= 0 {
		return nil
	}
	every := min(s.cfg.Every, s.cfg.LeaseTTL/3)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := s.Tick(ctx); err != nil && ctx.Err() == nil {
			s.logger.Warn("archive: periodic pass", "error", err)
		}
		t.Reset(every)
	}
}

// ReadPass returns the pass record in kv and its revision (0: none yet).
func ReadPass(ctx context.Context, kv jetstream.KeyValue) (PassRecord, uint64, error) {
	var rec PassRecord
	e, err := kv.Get(ctx, wire.ArchivePassKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return rec, 0, nil
	}
	if err != nil {
		return rec, 0, fmt.Errorf("read %s: %w", wire.ArchivePassKey, err)
	}
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return rec, 0, fmt.Errorf("read %s: %w", wire.ArchivePassKey, err)
	}
	return rec, e.Revision(), nil
}

// put writes rec over revision rev (creating it when rev is 0) and
// returns the new revision.
func (s *Schedule) put(ctx context.Context, rec PassRecord, rev uint64) (uint64, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	if rev == 0 {
		return s.kv.Create(ctx, wire.ArchivePassKey, b)
	}
	return s.kv.Update(ctx, wire.ArchivePassKey, b, rev)
}

// Tick runs a pass if one is due, no other node runs one and this node
// takes the record first; it reports whether it ran one.
func (s *Schedule) Tick(ctx context.Context) (bool, error) {
	now := s.cfg.Now().UTC()
	s.mu.Lock()
	denied := s.denied != nil && now.Sub(s.deniedAt) < s.cfg.Every
	s.mu.Unlock()
	if denied {
		return false, nil
	}
	rec, rev, err := ReadPass(ctx, s.kv)
	if err != nil {
		return false, err
	}
	if rec.running(now, s.cfg.LeaseTTL) && rec.Owner != s.cfg.NodeID {
		return false, nil
	}
	cut := rec.Owner != "" // its owner stopped heartbeating: resume at once
	if !cut && !rec.Ended.IsZero() && now.Sub(rec.Ended) < s.cfg.Every {
		return false, nil
	}
	next := rec
	next.Owner, next.Heartbeat, next.Started, next.Progress = s.cfg.NodeID, now, now, nil
	if cut {
		next.CutBy, next.CutAt = rec.Owner, rec.Heartbeat
	}
	rev, err = s.put(ctx, next, rev)
	if err != nil {
		return false, nil // another node took it first
	}
	if cut {
		s.logger.Info("archive: resuming a pass cut on another node (or before a restart)", "cut_by", rec.Owner, "cut_heartbeat", rec.Heartbeat)
	}
	p, passErr := s.runHeld(ctx, next, rev, &rev)
	end := s.cfg.Now().UTC()
	final := next
	final.Owner, final.Heartbeat, final.Progress = "", time.Time{}, nil
	switch {
	case errors.Is(passErr, errLost):
		return true, fmt.Errorf("pass stopped: %w", passErr) // the record is another node's now
	case errors.Is(passErr, ErrNotAllowed):
		s.mu.Lock()
		first := s.denied == nil
		s.denied, s.deniedAt = passErr, end
		s.mu.Unlock()
		if first {
			s.logger.Warn("archive: archive.every is set, but this node's NATS user may not purge the event log (only the admin role may): "+
				"it leaves the passes to a node that may, or to `esjet archive run` as admin; said once", "error", passErr)
		}
		// Give the record back as it was (a cut pass still cut): a node
		// that may archive takes the pass at once.
		final = rec
	case ctx.Err() != nil:
		// The node stops: give the record back, the pass still due.
		final = rec
	default:
		s.mu.Lock()
		s.denied = nil
		s.mu.Unlock()
		final.Ended, final.By, final.Last, final.Error = end, s.cfg.NodeID, &p, ""
		final.Resumed = cut
		if !cut {
			final.CutBy, final.CutAt = "", time.Time{}
		}
		if passErr != nil {
			final.Error = passErr.Error()
		}
		s.logger.Info("archive: periodic pass", "archived", p.Archived, "finished", p.Finished, "seen", p.Seen, "total", p.Total,
			"decisions", p.Decisions, "bytes", p.Bytes, "took", end.Sub(next.Started), "resumed", cut, "error", passErr)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := s.put(wctx, final, rev); err != nil {
		return true, fmt.Errorf("record the pass's end: %w", err)
	}
	return true, passErr
}

// errLost: another node took the record while this one's pass ran.
var errLost = errors.New("archive: the pass record was taken by another node (this one stalled past the lease)")

// runHeld runs a pass while renewing rec (at rev) every third of the
// lease TTL; *last receives the record's revision when it returns. A
// renewal that fails because the record changed cancels the pass.
func (s *Schedule) runHeld(ctx context.Context, rec PassRecord, rev uint64, last *uint64) (Progress, error) {
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var mu sync.Mutex
	var latest Progress
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(s.cfg.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-pctx.Done():
				return
			case <-t.C:
			}
			mu.Lock()
			p := latest
			mu.Unlock()
			rec.Heartbeat, rec.Progress = s.cfg.Now().UTC(), &p
			r, err := s.put(pctx, rec, rev)
			if err != nil {
				var apiErr *jetstream.APIError
				if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
					cancel(errLost)
					return
				}
				s.logger.Warn("archive: renew the pass record", "error", err)
				continue
			}
			rev = r
		}
	})
	p, err := s.pass(pctx, func(p Progress) {
		mu.Lock()
		latest = p
		mu.Unlock()
	})
	close(done)
	wg.Wait()
	*last = rev
	if cause := context.Cause(pctx); errors.Is(cause, errLost) {
		return p, cause
	}
	return p, err
}

// Status is what /readyz and the console say of the periodic passes.
type Status struct {
	Every   string      `json:"every"`
	Pass    *PassRecord `json:"pass,omitempty"` // the fleet's record
	NextDue *time.Time  `json:"next_due,omitempty"`
	// NotAllowed says this node may not archive (its user may not purge).
	NotAllowed string `json:"not_allowed,omitempty"`
}

// Status reads the fleet's record and says what this node knows.
func (s *Schedule) Status(ctx context.Context) (Status, error) {
	st := Status{Every: s.cfg.Every.String()}
	s.mu.Lock()
	if s.denied != nil {
		st.NotAllowed = s.denied.Error() + "; run `esjet archive run` as admin, or give this node admin credentials"
	}
	s.mu.Unlock()
	rec, rev, err := ReadPass(ctx, s.kv)
	if err != nil {
		return st, err
	}
	if rev > 0 {
		st.Pass = &rec
		if !rec.Ended.IsZero() && rec.Owner == "" {
			due := rec.Ended.Add(s.cfg.Every)
			st.NextDue = &due
		}
	}
	return st, nil
}

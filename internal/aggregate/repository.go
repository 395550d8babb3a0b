package aggregate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/failpoint"
	"github.com/esjet/esjet/internal/streams"
)

// Config tunes a [Repository]. The zero value of every field means its
// default.
type Config struct {
	// Namespace scopes decision ids derived from idempotency keys.
	Namespace string
	// CacheSize bounds the hot aggregates kept in memory. Zero means
	// 10,000; negative disables the cache.
	CacheSize int
	// SnapshotEvery writes a snapshot after that many events since the
	// last one. Zero means 100; negative disables snapshots.
	SnapshotEvery int
	// ConflictRetries is how many times a conflicting command is decided
	// again on the reloaded tail before [ErrConflict]. Zero means 5.
	ConflictRetries int
	// IdempotencyHorizon is how long a decision made with an idempotency
	// key answers retries of that key. Zero means 24h.
	IdempotencyHorizon time.Duration
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() {
	if c.CacheSize == 0 {
		c.CacheSize = 10_000
	}
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = 100
	}
	if c.ConflictRetries == 0 {
		c.ConflictRetries = 5
	}
	if c.IdempotencyHorizon == 0 {
		c.IdempotencyHorizon = 24 * time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Command is one request to an aggregate.
type Command struct {
	Type    string
	ID      string
	Kind    string
	Payload json.RawMessage
	// IdempotencyKey, when set, makes the request safe to retry: the same
	// key with the same kind and payload returns the first result and
	// appends nothing; with another kind or payload it is [ErrKeyReused].
	IdempotencyKey string
	CorrelationID  string
	CausationID    string
	TraceParent    string
}

// Result is what handling a command did.
type Result struct {
	AggregateType string       `json:"aggregate_type"`
	AggregateID   string       `json:"aggregate_id"`
	Version       uint64       `json:"version"` // aggregate version after the decision
	DecisionID    string       `json:"decision_id,omitempty"`
	Seq           uint64       `json:"seq,omitempty"` // stream sequence of the decision
	Events        []EventRef   `json:"events"`
	Commands      []CommandRef `json:"commands"`
	// Replayed is true when an idempotent retry returned the first result.
	Replayed bool `json:"replayed,omitempty"`
}

// EventRef names a recorded event.
type EventRef struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Version uint64 `json:"version"`
	Seq     uint64 `json:"seq"`
}

// CommandRef names a recorded command.
type CommandRef struct {
	ID           string     `json:"id"`
	Kind         string     `json:"kind"`
	Report       bool       `json:"report,omitempty"`
	DeliverAfter *time.Time `json:"deliver_after,omitempty"`
}

// Stats are counters since the repository was created.
type Stats struct {
	Commands         int64 // commands handled (decided), replays excluded
	Replays          int64 // idempotent retries answered from the log
	CacheHits        int64
	ColdLoads        int64
	SnapshotHits     int64
	SnapshotsWritten int64
	RecordsRead      int64 // decisions read from the log by loads and conflict reloads
	Conflicts        int64
	Cached           int // aggregates in the cache now
}

type counters struct {
	commands, replays, cacheHits, coldLoads, snapshotHits, snapshotsWritten, recordsRead, conflicts atomic.Int64
}

// Repository handles commands for the registered aggregate types. It is safe
// for concurrent use; commands to one aggregate are serialised inside the
// process, and several processes may serve the same aggregates (optimistic
// concurrency sorts them out).
type Repository struct {
	log    *streams.Log
	snaps  jetstream.KeyValue
	reg    *Registry
	cfg    Config
	logger *slog.Logger
	cache  *lru
	locks  stripes
	space  uuid.UUID
	stats  counters
}

// NewRepository returns a repository over log, with snapshots in snaps.
// logger may be nil.
func NewRepository(log *streams.Log, snaps jetstream.KeyValue, reg *Registry, cfg Config, logger *slog.Logger) *Repository {
	cfg.setDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Repository{
		log: log, snaps: snaps, reg: reg, cfg: cfg,
		logger: logger.With("component", "aggregate"),
		cache:  newLRU(cfg.CacheSize),
		space:  uuid.NewSHA1(uuid.NameSpaceURL, []byte("esjet:"+cfg.Namespace)),
	}
}

// Registry returns the aggregate types the repository serves.
func (r *Repository) Registry() *Registry { return r.reg }

// Log returns the event log under the repository.
func (r *Repository) Log() *streams.Log { return r.log }

// Stats returns the repository's counters.
func (r *Repository) Stats() Stats {
	s := &r.stats
	return Stats{
		Commands: s.commands.Load(), Replays: s.replays.Load(), CacheHits: s.cacheHits.Load(),
		ColdLoads: s.coldLoads.Load(), SnapshotHits: s.snapshotHits.Load(), SnapshotsWritten: s.snapshotsWritten.Load(),
		RecordsRead: s.recordsRead.Load(), Conflicts: s.conflicts.Load(), Cached: r.cache.len(),
	}
}

// DecisionID is the decision id a request with idempotency key key gets:
// deterministic, so a retry after a crash finds its first decision.
func (r *Repository) DecisionID(typ, id, key string) string {
	return uuid.NewSHA1(r.space, []byte(typ+"/"+id+"/"+key)).String()
}

// digest identifies a request's content for idempotency: kind + payload,
// with insignificant JSON whitespace removed.
func digest(kind string, payload json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	var buf []byte
	if len(payload) > 0 {
		if c, err := compact(payload); err == nil {
			buf = c
		} else {
			buf = payload
		}
	}
	h.Write(buf)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Handle decides cmd against the aggregate's current state and appends the
// decision. Errors: [ErrUnknownType], [ErrUnknownCommand], [ErrBadCommand],
// a [*Rejection] (wraps [ErrRejected]), [ErrKeyReused], [ErrConflict],
// [ErrTooLarge], a [*streams.TokenError] for a bad id, [ErrInvalidDecision]
// for an aggregate that broke the contract, or an infrastructure error.
func (r *Repository) Handle(ctx context.Context, cmd Command) (Result, error) {
	def, err := r.reg.Get(cmd.Type)
	if err != nil {
		return Result{}, err
	}
	if err := streams.ValidateToken("aggregate id", cmd.ID); err != nil {
		return Result{}, err
	}
	if _, ok := def.commands[cmd.Kind]; !ok {
		return Result{}, fmt.Errorf("%w: %s has no command %q (it has: %v)", ErrUnknownCommand, def.typ, cmd.Kind, def.Commands())
	}
	decisionID := uuid.Must(uuid.NewV7()).String()
	dig := ""
	if cmd.IdempotencyKey != "" {
		decisionID = r.DecisionID(cmd.Type, cmd.ID, cmd.IdempotencyKey)
		dig = digest(cmd.Kind, cmd.Payload)
	}
	key := cmd.Type + "/" + cmd.ID
	mu := r.locks.lock(key)
	mu.Lock()
	defer mu.Unlock()

	e, err := r.get(ctx, def, cmd.Type, cmd.ID)
	if err != nil {
		return Result{}, err
	}
	tailChecked := false
	for attempt := 0; ; attempt++ {
		if cmd.IdempotencyKey != "" {
			rd, ok, err := r.findKeyed(ctx, e, cmd.Type, cmd.ID, decisionID)
			if err != nil {
				return Result{}, err
			}
			if ok {
				return r.replay(ctx, rd, dig)
			}
		}
		dec, err := def.Decide(e.state, cmd.Kind, cmd.Payload)
		if !tailChecked && (errors.Is(err, ErrRejected) || (err == nil && len(dec.Events) == 0)) {
			// A rejection or a no-op appends nothing, so no expectation
			// would catch a stale cache (another node moved the aggregate):
			// check the tail once before answering.
			tailChecked = true
			before := e.pos
			if rerr := r.refresh(ctx, def, cmd.Type, cmd.ID, e, 0); rerr != nil {
				r.cache.remove(key)
				return Result{}, rerr
			}
			if e.pos != before {
				continue
			}
		}
		if err != nil {
			return Result{}, err
		}
		if len(dec.Events) == 0 {
			if len(dec.Commands) > 0 {
				return Result{}, fmt.Errorf("%w: %s.%s issued %d command(s) without recording an event", ErrInvalidDecision, cmd.Type, cmd.Kind, len(dec.Commands))
			}
			r.stats.commands.Add(1)
			return Result{AggregateType: cmd.Type, AggregateID: cmd.ID, Version: e.pos.Version, Seq: e.pos.Seq, Events: []EventRef{}, Commands: []CommandRef{}}, nil
		}
		sd, err := toStreams(cmd, decisionID, dig, dec)
		if err != nil {
			return Result{}, err
		}
		failpoint.Hit(failpoint.BeforeAppend)
		rec, err := r.log.Append(ctx, sd, e.pos)
		var conflict *streams.ConflictError
		switch {
		case errors.As(err, &conflict):
			r.stats.conflicts.Add(1)
			if attempt >= r.cfg.ConflictRetries {
				r.cache.remove(key)
				return Result{}, fmt.Errorf("%w: %s/%s changed %d times while deciding %s; retry later", ErrConflict, cmd.Type, cmd.ID, attempt+1, cmd.Kind)
			}
			if err := sleepJitter(ctx, attempt); err != nil {
				return Result{}, err
			}
			if err := r.refresh(ctx, def, cmd.Type, cmd.ID, e, conflict.Actual.Seq); err != nil {
				r.cache.remove(key)
				return Result{}, err
			}
			continue
		case errors.Is(err, streams.ErrTooLarge):
			return Result{}, fmt.Errorf("%w: %w", ErrTooLarge, err)
		case errors.Is(err, streams.ErrInvalidDecision), errors.Is(err, streams.ErrInvalidToken):
			return Result{}, fmt.Errorf("%w: %s.%s: %w", ErrInvalidDecision, cmd.Type, cmd.Kind, err)
		case err != nil:
			// The outcome may be unknown: forget the cached state so the
			// next command reloads what the log really holds.
			r.cache.remove(key)
			return Result{}, fmt.Errorf("handle %s/%s %s: %w", cmd.Type, cmd.ID, cmd.Kind, err)
		}
		failpoint.Hit(failpoint.AfterAppend) // crash tests: stored, not yet answered
		if rec.RequestDigest != dig {
			// Another request with the same key won the race.
			r.cache.remove(key)
			return Result{}, fmt.Errorf("%w: key %q was first used for another request on %s/%s", ErrKeyReused, cmd.IdempotencyKey, cmd.Type, cmd.ID)
		}
		if rec.FirstVersion() != e.pos.Version+1 {
			// Append returned an earlier copy of this decision.
			r.cache.remove(key)
			r.stats.replays.Add(1)
			res := resultOf(rec)
			res.Replayed = true
			return res, nil
		}
		if err := r.fold(def, e, rec); err != nil {
			r.cache.remove(key)
			return Result{}, err
		}
		if r.cfg.SnapshotEvery > 0 && e.sinceSnapshot >= r.cfg.SnapshotEvery {
			r.writeSnapshot(ctx, def, cmd.Type, cmd.ID, e)
		}
		r.cache.put(key, e)
		r.stats.commands.Add(1)
		return resultOf(rec), nil
	}
}

// State is an aggregate's current state.
type State struct {
	Type     string           `json:"aggregate_type"`
	ID       string           `json:"aggregate_id"`
	Position streams.Position `json:"position"`
	Value    any              `json:"state"`
}

// Get returns the aggregate's current state, reading the tail of the log
// past what is cached so a write by another node is seen. [ErrNotFound] if
// the aggregate has no events.
func (r *Repository) Get(ctx context.Context, typ, id string) (State, error) {
	def, err := r.reg.Get(typ)
	if err != nil {
		return State{}, err
	}
	if err := streams.ValidateToken("aggregate id", id); err != nil {
		return State{}, err
	}
	key := typ + "/" + id
	mu := r.locks.lock(key)
	mu.Lock()
	defer mu.Unlock()
	e, err := r.get(ctx, def, typ, id)
	if err != nil {
		return State{}, err
	}
	if err := r.refresh(ctx, def, typ, id, e, 0); err != nil {
		r.cache.remove(key)
		return State{}, err
	}
	if e.pos.Seq == 0 {
		return State{}, fmt.Errorf("%w: %s/%s has no events", ErrNotFound, typ, id)
	}
	// A copy: the cached value goes on evolving under the lock while the
	// caller reads (and marshals) this one without it.
	value, err := def.copyState(e.state)
	if err != nil {
		return State{}, fmt.Errorf("copy state of %s/%s: %w", typ, id, err)
	}
	return State{Type: typ, ID: id, Position: e.pos, Value: value}, nil
}

// get returns the cached entry or loads it cold: snapshot + tail.
func (r *Repository) get(ctx context.Context, def *Definition, typ, id string) (*entry, error) {
	key := typ + "/" + id
	if e, ok := r.cache.get(key); ok {
		r.stats.cacheHits.Add(1)
		return e, nil
	}
	r.stats.coldLoads.Add(1)
	e, ok := (*entry)(nil), false
	if r.cfg.SnapshotEvery > 0 {
		e, ok = r.readSnapshot(ctx, def, typ, id)
	}
	if !ok {
		e = &entry{state: def.newState(), recent: map[string]recentDecision{}}
	}
	if err := r.refresh(ctx, def, typ, id, e, 0); err != nil {
		return nil, err
	}
	if r.cfg.SnapshotEvery > 0 && e.sinceSnapshot >= r.cfg.SnapshotEvery {
		r.writeSnapshot(ctx, def, typ, id, e)
	}
	if e.pos.Seq > 0 {
		r.cache.put(key, e)
	}
	return e, nil
}

// refresh folds the records stored after e's position into e — only the
// tail. atLeast, when known (a conflict names the actual position), waits
// for a lagging replica to have it.
func (r *Repository) refresh(ctx context.Context, def *Definition, typ, id string, e *entry, atLeast uint64) error {
	var opts []streams.LoadOption
	if atLeast > e.pos.Seq {
		opts = append(opts, streams.AtLeast(atLeast))
	}
	recs, err := r.log.Load(ctx, typ, id, e.pos, opts...)
	if err != nil {
		return err
	}
	r.stats.recordsRead.Add(int64(len(recs)))
	for _, rec := range recs {
		if err := r.fold(def, e, rec); err != nil {
			return err
		}
	}
	return nil
}

// fold applies one stored decision to e, all or nothing: if Evolve panics
// the entry is left as it was and the panic is returned as an error (the
// caller evicts the entry). Replay only evolves: the commands in rec are not
// dispatched here (the relay reads them from the log).
func (r *Repository) fold(def *Definition, e *entry, rec streams.Record) (err error) {
	state := e.state
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s.Evolve panicked on %s/%s seq %d: %v", ErrInvalidDecision, def.typ, rec.AggregateType, rec.AggregateID, rec.Seq, p)
		}
	}()
	for _, ev := range rec.Events {
		state = def.evolve(state, eventFrom(ev))
	}
	e.state = state
	e.pos = rec.Position()
	e.sinceSnapshot += len(rec.Events)
	horizon := r.cfg.Now().Add(-r.cfg.IdempotencyHorizon)
	if rec.IdempotencyKey != "" && rec.Events[0].Time.After(horizon) {
		at := rec.Events[0].Time
		e.recent[rec.ID] = recentDecision{Seq: rec.Seq, Digest: rec.RequestDigest, At: at}
		if e.oldest.IsZero() || at.Before(e.oldest) {
			e.oldest = at
		}
	}
	// Prune only when something has expired: a full pass, then nothing
	// until the new oldest entry expires.
	if !e.oldest.IsZero() && e.oldest.Before(horizon) {
		e.oldest = time.Time{}
		for id, rd := range e.recent {
			if rd.At.Before(horizon) {
				delete(e.recent, id)
			} else if e.oldest.IsZero() || rd.At.Before(e.oldest) {
				e.oldest = rd.At
			}
		}
	}
	return nil
}

// findKeyed looks for a keyed decision the recent set may not hold: when a
// snapshot carried only the newest part of it (recentSince after the
// horizon's start), older ones are searched in the log.
func (r *Repository) findKeyed(ctx context.Context, e *entry, typ, id, decisionID string) (recentDecision, bool, error) {
	if rd, ok := e.recent[decisionID]; ok {
		return rd, true, nil
	}
	horizon := r.cfg.Now().Add(-r.cfg.IdempotencyHorizon)
	if e.recentSince.IsZero() || !e.recentSince.After(horizon) {
		return recentDecision{}, false, nil // the set is complete for the horizon
	}
	rec, ok, err := r.log.FindDecision(ctx, typ, id, decisionID, horizon)
	if err != nil || !ok {
		return recentDecision{}, false, err
	}
	return recentDecision{Seq: rec.Seq, Digest: rec.RequestDigest, At: rec.Events[0].Time}, true, nil
}

// replay answers a retried request from the log.
func (r *Repository) replay(ctx context.Context, rd recentDecision, dig string) (Result, error) {
	if rd.Digest != dig {
		return Result{}, fmt.Errorf("%w: it was first used at %s for another command or payload; use a new key for a new request",
			ErrKeyReused, rd.At.Format(time.RFC3339))
	}
	recs, err := r.log.ReadFrom(ctx, rd.Seq, 1)
	if err != nil {
		return Result{}, err
	}
	if len(recs) != 1 || recs[0].Seq != rd.Seq {
		return Result{}, fmt.Errorf("replay decision at seq %d: not found in the log", rd.Seq)
	}
	r.stats.replays.Add(1)
	res := resultOf(recs[0])
	res.Replayed = true
	return res, nil
}

func compact(raw json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func toStreams(cmd Command, decisionID, dig string, dec Decision) (streams.Decision, error) {
	sd := streams.Decision{
		ID: decisionID, AggregateType: cmd.Type, AggregateID: cmd.ID,
		CorrelationID: cmd.CorrelationID, CausationID: cmd.CausationID, TraceParent: cmd.TraceParent,
		IdempotencyKey: cmd.IdempotencyKey, RequestDigest: dig,
	}
	if sd.CorrelationID == "" {
		sd.CorrelationID = decisionID
	}
	for i, ne := range dec.Events {
		data, err := json.Marshal(ne.Data)
		if err != nil {
			return sd, fmt.Errorf("%w: %s.%s event %d (%s): %v", ErrInvalidDecision, cmd.Type, cmd.Kind, i, ne.Type, err)
		}
		sd.Events = append(sd.Events, streams.Event{Type: ne.Type, Schema: ne.Schema, Data: data})
	}
	for i, nc := range dec.Commands {
		payload, err := json.Marshal(nc.Payload)
		if err != nil {
			return sd, fmt.Errorf("%w: %s.%s command %d (%s): %v", ErrInvalidDecision, cmd.Type, cmd.Kind, i, nc.Kind, err)
		}
		sd.Commands = append(sd.Commands, streams.Command{Kind: nc.Kind, Payload: payload, Report: nc.Report, DeliverAfter: nc.DeliverAfter})
	}
	return sd, nil
}

func resultOf(rec streams.Record) Result {
	res := Result{
		AggregateType: rec.AggregateType, AggregateID: rec.AggregateID, Version: rec.LastVersion(),
		DecisionID: rec.ID, Seq: rec.Seq, Events: make([]EventRef, 0, len(rec.Events)), Commands: make([]CommandRef, 0, len(rec.Commands)),
	}
	for _, e := range rec.Events {
		res.Events = append(res.Events, EventRef{ID: e.ID, Type: e.Type, Version: e.Version, Seq: rec.Seq})
	}
	for _, c := range rec.Commands {
		ref := CommandRef{ID: c.ID, Kind: c.Kind, Report: c.Report}
		if !c.DeliverAfter.IsZero() {
			t := c.DeliverAfter
			ref.DeliverAfter = &t
		}
		res.Commands = append(res.Commands, ref)
	}
	return res
}

// sleepJitter waits before deciding again: 1ms, 2ms, 4ms… (capped at 50ms),
// each with ±50% jitter so racing writers spread out.
func sleepJitter(ctx context.Context, attempt int) error {
	base := time.Millisecond << min(attempt, 6)
	base = min(base, 50*time.Millisecond)
	d := base/2 + time.Duration(rand.Int64N(int64(base)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

package aggregate

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/shred"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/telemetry"
	"github.com/esjet/esjet/internal/wire"
)

// Config tunes a [Repository]. The zero value of every field means its
// default.
type Config struct {
	// Namespace scopes decision ids derived from idempotency keys.
	Namespace string
	// CacheSize bounds the hot aggregates kept in memory. Zero means
	// 10,000; negative disables the cache.
	CacheSize int
	// CacheBytes bounds the cache's estimated memory as well: the least
	// recently used aggregates go first when their states (the size of
	// their last snapshot plus the events folded since), their recent
	// idempotency keys and outstanding commands add up to more. Zero means
	// 64 MiB; negative: no byte bound.
	CacheBytes int64
	// SnapshotEvery writes a snapshot after that many events since the
	// last one. Zero means 100; negative disables snapshots.
	SnapshotEvery int
	// SnapshotSpan also writes a snapshot when an aggregate's newest event
	// lies more than that many messages of the log after its last snapshot
	// (after its first event when it has none), so a cold load reads at
	// most that stretch of the log, however far apart its events are.
	// Zero means 10,000; negative: only SnapshotEvery counts. Snapshots
	// off (SnapshotEvery negative) turns it off too.
	SnapshotSpan int
	// ConflictRetries is how many times a conflicting command is decided
	// again on the reloaded tail before [ErrConflict]. Zero means 5.
	ConflictRetries int
	// IdempotencyHorizon is how long a decision made with an idempotency
	// key answers retries of that key. Zero means 24h.
	IdempotencyHorizon time.Duration
	// RawCommands are, per raw aggregate type, the command kinds a raw
	// append may issue ([Repository.AppendRaw]); any other kind is refused
	// with a [*RawCommandError]. Nil or a type without an entry: none.
	RawCommands map[string][]string
	// Sites says which aggregates this node may write in an edge fleet;
	// the zero value: all of them. A write elsewhere is refused with a
	// [*WrongSiteError].
	Sites Sites
	// Sealer seals personal fields (docs/personal-data.md) before they are
	// appended or snapshotted. Nil: a decision or state with personal
	// fields is refused.
	Sealer *shred.Sealer
	// Personal are the raw types' personal fields, by "<type>.<event type
	// or command kind>" (config aggregates.raw.<type>.personal).
	Personal shred.Registry
	// PlainKinds are command kinds whose payloads are appended unsealed:
	// at an edge site, the kinds its hub carries out (the hub has no keys).
	PlainKinds []string
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// Telemetry records decide and append latency. Nil records nothing.
	Telemetry *telemetry.Telemetry
}

// setDefaults fills what is zero with config.Default()'s values: the
// defaults are stated once, there.
func (c *Config) setDefaults() {
	d := config.Default().Aggregates
	if c.CacheSize == 0 {
		c.CacheSize = d.CacheSize
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = int64(d.CacheBytes)
	}
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = d.SnapshotEvery
	}
	if c.SnapshotSpan == 0 {
		c.SnapshotSpan = d.SnapshotSpan
	}
	if c.ConflictRetries == 0 {
		c.ConflictRetries = d.ConflictRetries
	}
	if c.IdempotencyHorizon == 0 {
		c.IdempotencyHorizon = d.IdempotencyHorizon.Std()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Request is one request to an aggregate.
type Request struct {
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
	AggregateType string `json:"aggregate_type"`
	AggregateID   string `json:"aggregate_id"`
	Version       uint64 `json:"version"` // aggregate version after the decision
	DecisionID    string `json:"decision_id,omitempty"`
	Seq           uint64 `json:"seq,omitempty"` // stream sequence of the decision
	// Position is the global position of the decision's last event (or,
	// when the command recorded nothing, of the aggregate's last decision):
	// pass it as a view query's after to read your own write.
	Position uint64       `json:"position,omitempty"`
	Events   []EventRef   `json:"events"`
	Commands []CommandRef `json:"commands"`
	// Replayed is true when an idempotent retry returned the first result.
	Replayed bool `json:"replayed,omitempty"`
}

// EventRef names a recorded event.
type EventRef struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Version uint64 `json:"version"`
	Seq     uint64 `json:"seq"`
	// Position is the event's global position in the namespace's log.
	Position uint64 `json:"position"`
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
	TailReads        int64 // reads of an aggregate's tail from the log (a round trip each)
	Conflicts        int64
	// OutcomesRefused counts outcomes HandleOutcome refused: not for an
	// outstanding command of the aggregate, or rejected by Decide. Each is
	// logged at WARN with its command id and reason.
	OutcomesRefused int64
	Cached          int   // aggregates in the cache now
	CachedBytes     int64 // their estimated memory (see Config.CacheBytes)
}

type counters struct {
	commands, replays, cacheHits, coldLoads, snapshotHits, snapshotsWritten, recordsRead, tailReads, conflicts, outcomesRefused atomic.Int64
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
	// outcomeSpace derives the ids of outcome decisions: apart from space,
	// so no client's idempotency key yields one. It is the log's
	// namespace's, as the operator tools (internal/ops) derive it.
	outcomeSpace uuid.UUID
	stats        counters
}

// NewRepository returns a repository over log, with snapshots in snaps.
// logger may be nil.
func NewRepository(log *streams.Log, snaps jetstream.KeyValue, reg *Registry, cfg Config, logger *slog.Logger) *Repository {
	cfg.setDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	idns, ons := cfg.Namespace, cfg.Namespace
	if log != nil {
		ons = log.IDSpace()
		if ons != log.Names().Namespace {
			idns = ons // restored under another name: its ids are the first namespace's
		}
	}
	return &Repository{
		log: log, snaps: snaps, reg: reg, cfg: cfg,
		logger:       logger.With("component", "aggregate"),
		cache:        newLRU(cfg.CacheSize, max(cfg.CacheBytes, 0)),
		space:        wire.RequestSpace(idns),
		outcomeSpace: wire.OutcomeSpace(ons),
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
		RecordsRead: s.recordsRead.Load(), TailReads: s.tailReads.Load(), Conflicts: s.conflicts.Load(), OutcomesRefused: s.outcomesRefused.Load(),
		Cached: r.cache.len(), CachedBytes: r.cache.held(),
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
	def, a, err := r.resolve(typ, id)
	if err != nil {
		return State{}, err
	}
	mu := r.locks.lock(a.String())
	mu.Lock()
	defer mu.Unlock()
	e, err := r.current(ctx, def, a)
	if err != nil {
		return State{}, err
	}
	if e.pos.Version == 0 { // (a subject may hold messages esjet did not write, and no events)
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

package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Config tunes a [Runner]. The zero value of every field means its default.
type Config struct {
	// NodeID names this node in leases and checkpoints. Zero: a random id.
	NodeID string
	// Heartbeat is how often an owner renews its lease and reads the
	// control record and requests. Zero means 1s.
	Heartbeat time.Duration
	// LeaseTTL is how long a lease outlives its last heartbeat before
	// another node may take the partition over. Zero means 5s.
	LeaseTTL time.Duration
	// Attempts bounds a handler's tries on one event before it is parked
	// (or the projection stops). Zero means 3.
	Attempts int
	// RetryBackoff is the wait before the second try, doubling after.
	// Zero means 100ms.
	RetryBackoff time.Duration
	// Replicas of the buckets the runner creates. Zero means 1.
	Replicas int
	// UnservedMaxAge is how long a view generation that no longer serves
	// is kept (the previous one, for a switch back) before it stops
	// running and its bucket is deleted (streams.unserved_views_max_age).
	// Zero: kept until a rebuild takes its bucket.
	UnservedMaxAge time.Duration
}

func (c *Config) setDefaults() {
	if c.NodeID == "" {
		c.NodeID = nats.NewInbox()[len("_INBOX."):]
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = time.Second
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 5 * time.Second
	}
	if c.Attempts == 0 {
		c.Attempts = 3
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = 100 * time.Millisecond
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
}

// Runner runs a namespace's projections on one node: it takes every free
// partition's lease (several nodes share the work; an owner that stops
// heartbeating loses its partitions after LeaseTTL) and follows the log
// for each partition it owns.
type Runner struct {
	js     jetstream.JetStream
	nc     *nats.Conn
	log    *streams.Log
	names  streams.Names
	ns     string
	defs   []Definition
	cfg    Config
	logger *slog.Logger
	nodeID string
	ctl    controlStore
	events jetstream.Stream

	mu      sync.Mutex
	running map[string]*partition
	// away: partitions this runner stood down from before a message a
	// newer build wrote (standdown.go), kept to log once per place.
	away map[string]away
	// switchMarks: per generation being built, the log's end at the last
	// look (maybeSwitch).
	switchMarks map[string]uint64
	expire      *expirer
}

// NewRunner returns a Runner of defs over log. It creates the control
// bucket when missing. logger may be nil.
func NewRunner(ctx context.Context, js jetstream.JetStream, log *streams.Log, defs []Definition, cfg Config, logger *slog.Logger) (*Runner, error) {
	cfg.setDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	seen := map[string]bool{}
	for _, d := range defs {
		if err := d.Validate(); err != nil {
			return nil, err
		}
		if seen[d.Name] {
			return nil, invalid("projection %s is defined twice", d.Name)
		}
		seen[d.Name] = true
	}
	names := log.Names()
	kv, err := ensureBucket(ctx, js, wire.ProjectionsBucket(names.Namespace), cfg.Replicas, false, logger)
	if err != nil {
		return nil, err
	}
	events, err := js.Stream(ctx, names.Events)
	if err != nil {
		return nil, fmt.Errorf("projections: event log %s: %w", names.Events, err)
	}
	r := &Runner{js: js, nc: js.Conn(), log: log, names: names, ns: names.Namespace, defs: defs, cfg: cfg,
		logger: logger.With("component", "projection"), nodeID: cfg.NodeID, ctl: controlStore{kv: kv}, events: events,
		running: map[string]*partition{}, away: map[string]away{}, switchMarks: map[string]uint64{}}
	r.expire = newExpirer(js, r.ns, r.ctl, cfg, r.logger)
	// Every projection exists (control record, bucket) once the runner
	// does: a query right after the node starts finds it.
	for _, d := range defs {
		if _, err := r.ensure(ctx, d); err != nil {
			return nil, fmt.Errorf("projection %s: %w", d.Name, err)
		}
	}
	return r, nil
}

// ensureBucket opens or creates a KV bucket (atomic: with atomic batches
// allowed on its stream, as a view's writes are batches). A missing bucket
// is created with its whole configuration in one CREATE: the node's role
// may create its buckets but not update them, so an existing one is checked
// instead (streams.Check) and refused if it would lose what it holds or
// lacks atomic batches (esjet provision --view applies the configuration).
func (r *Runner) ensureBucket(ctx context.Context, bucket string, atomic bool) (jetstream.KeyValue, error) {
	return ensureBucket(ctx, r.js, bucket, r.cfg.Replicas, atomic, r.logger)
}

func ensureBucket(ctx context.Context, js jetstream.JetStream, bucket string, replicas int, atomic bool, logger *slog.Logger) (jetstream.KeyValue, error) {
	want := BucketStreamConfig(bucket, replicas, atomic)
	st, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, want)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			// Another node made it first: check what it made.
			st, err = js.Stream(ctx, want.Name)
		} else if err == nil {
			return js.KeyValue(ctx, bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", bucket, err)
	}
	benign, err := streams.Check(st.CachedInfo().Config, want)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", bucket, err)
	}
	if len(benign) > 0 && logger != nil {
		logger.Warn("bucket differs from the configuration in ways that lose nothing; run `esjet provision` as an admin user to apply it",
			"stream", want.Name, "fields", benign)
	}
	return js.KeyValue(ctx, bucket)
}

// BucketStreamConfig is the stream of a projection bucket: the control
// bucket, or (atomic) a view's.
func BucketStreamConfig(bucket string, replicas int, atomic bool) jetstream.StreamConfig {
	sc := streams.BucketStreamConfig(jetstream.KeyValueConfig{Bucket: bucket, History: 1, Replicas: replicas, Description: "esjet projections"})
	sc.AllowAtomicPublish = atomic
	return sc
}

// viewStream opens (creating it when missing) the stream of a view bucket.
func (r *Runner) viewStream(ctx context.Context, bucket string) (jetstream.Stream, error) {
	if _, err := r.ensureBucket(ctx, bucket, true); err != nil {
		return nil, err
	}
	return r.js.Stream(ctx, wire.KVStream(bucket))
}

// Run takes and runs partitions until ctx ends, and returns after every
// partition it ran has stored its batch and stopped.
func (r *Runner) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(r.cfg.Heartbeat)
	defer tick.Stop()
	var views []string
	for _, d := range r.defs {
		if d.Sink == nil {
			views = append(views, d.Name)
		}
	}
	// Expiry looks often enough to be on time within a tenth of the age,
	// at most once a minute.
	sweepEvery := min(time.Minute, max(r.cfg.Heartbeat, r.cfg.UnservedMaxAge/10))
	var swept time.Time
	for {
		for _, d := range r.defs {
			if err := r.claim(ctx, d, &wg); err != nil && ctx.Err() == nil {
				r.logger.Warn("projection: claim partitions", "projection", d.Name, "error", err)
			}
		}
		if time.Since(swept) >= sweepEvery {
			r.expire.sweep(ctx, views)
			swept = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// claim starts the partitions of d that run nowhere, and switches a built
// generation in when it has caught up.
func (r *Runner) claim(ctx context.Context, d Definition, wg *sync.WaitGroup) error {
	ctl, err := r.ensure(ctx, d)
	if err != nil {
		return err
	}
	if ctl.Building > 0 {
		r.maybeSwitch(ctx, d, ctl)
	}
	for _, gen := range ctl.generations() {
		for part := range d.partitions() {
			key := leaseKey(d.Name, gen, part)
			r.mu.Lock()
			_, mine := r.running[key]
			r.mu.Unlock()
			if mine || r.keepsAway(key) {
				continue
			}
			rev, ok, err := r.acquire(ctx, key)
			if err != nil || !ok {
				continue
			}
			p := &partition{r: r, def: d, gen: gen, part: part, bucket: ctl.bucket(r.ns, d.Name, gen), leaseRev: rev, token: rev,
				logger: r.logger.With("projection", d.Name, "generation", gen, "partition", part)}
			r.mu.Lock()
			r.running[key] = p
			r.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.runPartition(ctx, key, p)
			}()
		}
	}
	return nil
}

func (r *Runner) runPartition(ctx context.Context, key string, p *partition) {
	defer func() {
		r.mu.Lock()
		delete(r.running, key)
		r.mu.Unlock()
	}()
	p.logger.Info("projection partition taken", "token", p.token)
	err := p.open(ctx)
	if err == nil {
		err = p.follow(ctx)
	}
	if errors.Is(err, errNewerBuild) && ctx.Err() == nil {
		r.standDown(ctx, key, p, err)
		return
	}
	if err != nil && ctx.Err() == nil {
		p.logger.Warn("projection partition let go", "error", err)
	}
	// Let the lease go at once, so another node need not wait out its TTL.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = r.ctl.kv.Delete(dctx, key, jetstream.LastRevision(p.leaseRev))
}

// ensure creates the projection's control record and its view's bucket
// when missing, and returns the control record.
func (r *Runner) ensure(ctx context.Context, d Definition) (Control, error) {
	ctl, rev, err := r.ctl.control(ctx, d.Name)
	if err != nil {
		return ctl, err
	}
	if rev == 0 && d.Sink == nil {
		// The view's bucket first: a query that finds the projection finds
		// its bucket.
		if _, err := r.viewStream(ctx, ctl.bucket(r.ns, d.Name, ctl.Active)); err != nil {
			return ctl, err
		}
	}
	if rev == 0 || ctl.Partitions != d.partitions() || ctl.Sink != (d.Sink != nil) {
		return r.ctl.update(ctx, d.Name, func(c *Control) error {
			if c.SlotsFrom == 0 && c.Latest <= 1 {
				c.SlotsFrom = 1 // nothing rebuilt yet: every generation in a slot
			}
			c.Partitions, c.Sink = d.partitions(), d.Sink != nil
			return nil
		})
	}
	return ctl, nil
}

// acquire takes the lease under key when it is free or its owner stopped
// heartbeating LeaseTTL ago.
func (r *Runner) acquire(ctx context.Context, key string) (uint64, bool, error) {
	l := Lease{Owner: r.nodeID, Heartbeat: time.Now().UTC(), State: StateRunning}
	b, _ := json.Marshal(l)
	e, err := r.ctl.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		rev, err := r.ctl.kv.Create(ctx, key, b)
		return rev, err == nil, nil
	case err != nil:
		return 0, false, err
	}
	var cur Lease
	// A lease stood down before a newer build's message is free at once.
	if json.Unmarshal(e.Value(), &cur) == nil && cur.State != StateNewerBuild && time.Since(cur.Heartbeat) < r.cfg.LeaseTTL {
		return 0, false, nil
	}
	rev, err := r.ctl.kv.Update(ctx, key, b, e.Revision())
	return rev, err == nil, nil
}

// maybeSwitch makes the generation being built the active one once every
// partition of it has caught up with the log: has passed where the log
// ended at this node's previous look (or at this one, the first time).
// The log's very end is not the mark: the partitions report their
// positions at each heartbeat, and under steady writes the log has always
// moved on since, so a rebuild that keeps up would never switch in. A
// switched-in generation is then at most about a heartbeat of writes
// behind, and reads after a position wait for it as for any generation.
func (r *Runner) maybeSwitch(ctx context.Context, d Definition, ctl Control) {
	info, err := r.events.Info(ctx)
	if err != nil {
		return
	}
	key := fmt.Sprintf("%s/%d", d.Name, ctl.Building)
	r.mu.Lock()
	mark, seen := r.switchMarks[key]
	r.switchMarks[key] = info.State.LastSeq
	r.mu.Unlock()
	if !seen {
		mark = info.State.LastSeq
	}
	for part := range d.partitions() {
		l, rev, err := r.ctl.lease(ctx, d.Name, ctl.Building, part)
		if err != nil || rev == 0 || time.Since(l.Heartbeat) > r.cfg.LeaseTTL {
			return
		}
		if seq, _ := wire.SplitPosition(l.Position); seq < mark {
			return
		}
	}
	r.mu.Lock()
	delete(r.switchMarks, key)
	r.mu.Unlock()
	_, err = r.ctl.update(ctx, d.Name, func(c *Control) error {
		if c.Building != ctl.Building {
			return errors.New("changed")
		}
		dropped, droppedSince := c.Previous, c.PreviousSince
		c.Previous, c.Active, c.Building = c.Active, c.Building, 0
		c.switched(r.ns, d.Name, dropped, droppedSince, time.Now().UTC())
		return nil
	})
	if err == nil {
		r.logger.Info("projection switched to its rebuilt generation", "projection", d.Name, "generation", ctl.Building, "previous", ctl.Active)
	}
}

// Progress is what one partition this node owns reports.
type Progress struct {
	Projection string
	Generation int
	Partition  int
	Position   uint64 // stored checkpoint
	LogEnd     uint64 // the log's last sequence as last seen
	Lag        uint64 // messages of the log after the checkpoint
}

// Progress reports the partitions this node owns now (for metrics).
func (r *Runner) Progress() []Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Progress, 0, len(r.running))
	for _, p := range r.running {
		pos, end := p.shownPos.Load(), p.shownEnd.Load()
		seq, _ := wire.SplitPosition(pos)
		pr := Progress{Projection: p.def.Name, Generation: p.gen, Partition: p.part, Position: pos, LogEnd: end}
		if end > seq {
			pr.Lag = end - seq
		}
		out = append(out, pr)
	}
	return out
}

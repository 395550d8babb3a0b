package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/node"
	"github.com/esjet/esjet/internal/streams"
)

// The edge phase (on demand: `esjet bench --phases edge --count N`): a hub
// and one site, two esjet nodes with their own embedded servers and data
// directories, linked as docs/edge.md sets them up (the site a leaf node of
// the hub; the hub's EVENTS sourcing the site's through the site's staging
// stream). Once a first decision has reached the hub, the hub goes away
// (the link is cut, as when e2e kills it), the site records N decisions
// on its own, and the hub comes back: the catch-up is how fast the hub's
// EVENTS took the backlog in, from its first message to its last (the
// stored timestamps at the hub), so the time the source takes to resume
// after the link returns is reported beside it, not in it.
//
// The raw side does the same work with no esjet code (edge_raw.go): a
// stream on a site-like server holding the same N messages (copied from the
// site: same subjects, headers and payloads), sourced by domain over a leaf
// link into a stream on a hub-like server with the same sync setting. Its
// source is created once the backlog is there and the link up (a raw
// source cut off and restarted waits out a create timeout of up to 40s;
// the esjet hub restarts its own), so its resume is that of a fresh source.

// DefaultEdgeDecisions is the edge phase's backlog when --count is 0.
const DefaultEdgeDecisions = 20_000

const (
	edgeSiteID = "s1"
	// edgeCatchUpTimeout bounds one side's wait for the whole backlog (the
	// hub's source may first wait out a create request sent while the link
	// was still down).
	edgeCatchUpTimeout = 5 * time.Minute
)

// Edge is the edge phase's figures beside its row: the resume (from the
// hub's start until its first backlog message was stored) and the wall
// time until the last one, per side, and the backlog's stored bytes at
// the site.
type Edge struct {
	Decisions      int     `json:"decisions"`
	SiteBytes      uint64  `json:"site_bytes"`
	ResumeSecs     float64 `json:"resume_seconds"`
	WallSecs       float64 `json:"wall_seconds"`
	RawResumeSecs  float64 `json:"raw_resume_seconds"`
	RawWallSecs    float64 `json:"raw_wall_seconds"`
	CatchUpSecs    float64 `json:"catch_up_seconds"`
	RawCatchUpSecs float64 `json:"raw_catch_up_seconds"`
	// MaxGap is the longest pause between two backlog messages stored in a
	// row at the hub, Stalled the pauses of 100ms or more added up (part of
	// CatchUpSecs).
	MaxGapSecs     float64 `json:"max_gap_seconds"`
	StalledSecs    float64 `json:"stalled_seconds"`
	RawMaxGapSecs  float64 `json:"raw_max_gap_seconds"`
	RawStalledSecs float64 `json:"raw_stalled_seconds"`
}

// catchUp is one side's measure: when the hub (or hub-like server)
// started, and when its first and last backlog messages were stored there.
type catchUp struct {
	start, first, last, done time.Time
	// maxGap is the longest pause between two messages stored in a row,
	// stalled the pauses of stallGap or more added up.
	maxGap, stalled time.Duration
}

func (c catchUp) span() time.Duration   { return c.last.Sub(c.first) }
func (c catchUp) resume() time.Duration { return c.first.Sub(c.start) }
func (c catchUp) wall() time.Duration   { return c.done.Sub(c.start) }

// side is the phase's row side for n messages caught up as c.
func (c catchUp) side(n int) Side {
	s := Side{Ops: int64(n), Seconds: c.span().Seconds()}
	if s.Seconds > 0 && n > 1 {
		// n messages stored over n-1 gaps between the first and the last.
		s.OpsPerSec = float64(n-1) / s.Seconds
	}
	return s
}

func (e *env) edgePhase(ctx context.Context, progress func(float64)) ([]Phase, error) {
	n := e.opts.Count
	if n <= 0 {
		n = DefaultEdgeDecisions
	}
	dir, err := os.MkdirTemp("", "esjet-bench-edge-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	f := &edgeFleet{e: e, dir: dir}
	defer f.close()
	if err := f.startHub(ctx); err != nil {
		return nil, err
	}
	if err := f.startSite(ctx); err != nil {
		return nil, err
	}
	names := streams.NamesFor(e.ns)
	// The link works: a first decision reaches the hub.
	if err := f.send(ctx, "s1-warm", 0); err != nil {
		return nil, err
	}
	if err := waitMsgs(ctx, f.hub.JetStream(), names.Events, 1, time.Minute); err != nil {
		return nil, fmt.Errorf("the first decision did not reach the hub: %w", err)
	}
	// The link is cut: the hub goes away while the site goes on.
	if err := f.closeHub(ctx); err != nil {
		return nil, err
	}
	progress(0.05)
	aggs := max(e.opts.Aggregates, 1)
	var done atomic.Int64
	stop := ticker(progress, func() float64 { return 0.05 + 0.35*float64(done.Load())/float64(n) })
	res := RunOps(ctx, Spec{Workers: e.opts.Workers, Ops: n, Done: &done}, sweep(func(ctx context.Context, i int) error {
		return f.send(ctx, "s1-"+strconv.Itoa(i%aggs), i)
	}))
	stop()
	if res.Errors > 0 {
		return nil, fmt.Errorf("backlog at the site: %d errors, the first: %w", res.Errors, res.FirstErr)
	}
	siteEvents, err := f.site.JetStream().Stream(ctx, names.Events)
	if err != nil {
		return nil, err
	}
	si, err := siteEvents.Info(ctx)
	if err != nil {
		return nil, err
	}
	if si.State.Msgs != uint64(n+1) {
		return nil, fmt.Errorf("the site's EVENTS holds %d messages, want %d", si.State.Msgs, n+1)
	}
	fig := &Edge{Decisions: n, SiteBytes: si.State.Bytes}

	// Raw first (the site's backlog is copied while the hub is away).
	progress(0.4)
	// Each side's servers start under a profiler label (edge=raw, edge=hub)
	// their goroutines inherit: `go tool pprof -tagfocus edge=hub` on a
	// --cpuprofile shows the hub's catch-up alone (the site's source
	// consumers run in the site's server, unlabelled).
	var rc catchUp
	pprof.Do(ctx, pprof.Labels("edge", "raw"), func(ctx context.Context) {
		rc, err = rawSourcing(ctx, rawSourcingConfig{
			dir: filepath.Join(dir, "raw"), syncAlways: f.syncAlways(), syncEvery: time.Duration(f.config(config.EdgeSite).NATS.Embedded.SyncInterval),
			compression: si.Config.Compression, duplicates: si.Config.Duplicates, from: siteEvents, count: n,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("raw: %w", err)
	}
	progress(0.6)

	// The hub comes back.
	ec := catchUp{start: time.Now()}
	pprof.Do(ctx, pprof.Labels("edge", "hub"), func(ctx context.Context) {
		if err = f.startHub(ctx); err == nil {
			err = waitMsgs(ctx, f.hub.JetStream(), names.Events, uint64(n+1), edgeCatchUpTimeout)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("hub catch-up: %w", err)
	}
	ec.done = time.Now()
	if err := timeline(ctx, f.hub.JetStream(), names.Events, 2, uint64(n+1), &ec); err != nil {
		return nil, err
	}
	if hi, err := f.hub.JetStream().Stream(ctx, names.Events); err == nil && hi.CachedInfo().State.Msgs != uint64(n+1) {
		return nil, fmt.Errorf("the hub's EVENTS holds %d messages after catch-up, want the site's %d exactly once", hi.CachedInfo().State.Msgs, n+1)
	}
	progress(1)

	fig.CatchUpSecs, fig.ResumeSecs, fig.WallSecs = ec.span().Seconds(), ec.resume().Seconds(), ec.wall().Seconds()
	fig.RawCatchUpSecs, fig.RawResumeSecs, fig.RawWallSecs = rc.span().Seconds(), rc.resume().Seconds(), rc.wall().Seconds()
	fig.MaxGapSecs, fig.StalledSecs = ec.maxGap.Seconds(), ec.stalled.Seconds()
	fig.RawMaxGapSecs, fig.RawStalledSecs = rc.maxGap.Seconds(), rc.stalled.Seconds()
	p := Phase{Name: PhaseEdge, Description: describe[PhaseEdge], Unit: "decision", Edge: fig}
	p.Esjet = ec.side(n)
	raw := rc.side(n)
	p.Raw = &raw
	if raw.OpsPerSec > 0 {
		p.Ratio, p.RatioOf = p.Esjet.OpsPerSec/raw.OpsPerSec, "throughput"
	}
	return []Phase{p}, nil
}

// edgeFleet is the phase's hub and site, in this process.
type edgeFleet struct {
	e         *env
	dir       string
	hub, site *node.Node
	leaf      string // the hub's leaf listener, host:port, kept across restarts
}

func (f *edgeFleet) syncAlways() bool {
	return f.e.cfg.NATS.Mode != config.ModeEmbedded || f.e.cfg.NATS.Embedded.Sync != config.SyncInterval
}

func (f *edgeFleet) config(role string) config.Config {
	cfg := f.e.cfg
	// Each its own embedded server without users, with the run's sync
	// setting (sync always in external mode: the default).
	cfg.NATS.Mode = config.ModeEmbedded
	cfg.NATS.Embedded = config.Default().NATS.Embedded
	if !f.syncAlways() {
		cfg.NATS.Embedded.Sync = config.SyncInterval
		cfg.NATS.Embedded.SyncInterval = f.e.cfg.NATS.Embedded.SyncInterval
	}
	cfg.NATS.Embedded.Listen = config.ListenNone
	cfg.NATS.Embedded.DataDir = filepath.Join(f.dir, role)
	cfg.HTTP.Listen = config.ListenNone
	cfg.Demo.Services = false
	cfg.Streams.Replicas = 1
	cfg.Edge = config.DefaultEdge()
	cfg.Edge.Role = role
	cfg.Edge.Sites = []string{edgeSiteID}
	cfg.Edge.StallAfter = config.Duration(10 * time.Minute)
	switch role {
	case config.EdgeHub:
		cfg.Edge.LeafListen = "127.0.0.1:0"
		if f.leaf != "" {
			cfg.Edge.LeafListen = f.leaf
		}
	case config.EdgeSite:
		cfg.Edge.Site = edgeSiteID
		cfg.Edge.HubURLs = []string{"nats-leaf://" + f.leaf}
	}
	return cfg
}

func (f *edgeFleet) start(ctx context.Context, role string) (*node.Node, error) {
	n, err := node.Start(ctx, f.config(role), node.Options{Logger: f.e.opts.Logger,
		Aggregates: []*aggregate.Definition{Account()}, Version: f.e.opts.Version,
		Handlers: map[string]consumer.Handler{"charge": consumer.HandlerFunc(noop)},
	})
	if err != nil {
		return nil, fmt.Errorf("start the edge %s: %w", role, err)
	}
	return n, nil
}

func (f *edgeFleet) startHub(ctx context.Context) error {
	hub, err := f.start(ctx, config.EdgeHub)
	if err != nil {
		return err
	}
	f.hub = hub
	if f.leaf == "" {
		u, err := url.Parse(hub.Broker().LeafURL())
		if err != nil || u.Host == "" {
			return fmt.Errorf("the edge hub has no leaf listener (%q): %v", hub.Broker().LeafURL(), err)
		}
		f.leaf = u.Host
	}
	return nil
}

func (f *edgeFleet) startSite(ctx context.Context) error {
	site, err := f.start(ctx, config.EdgeSite)
	f.site = site
	return err
}

func (f *edgeFleet) closeHub(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := f.hub.Close(cctx)
	f.hub = nil
	return err
}

func (f *edgeFleet) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range []*node.Node{f.site, f.hub} {
		if n != nil {
			_ = n.Close(ctx)
		}
	}
}

// send records one ~200-byte deposit at the site (the scale phase's event).
func (f *edgeFleet) send(ctx context.Context, id string, i int) error {
	body := []byte(`{"amount":` + strconv.Itoa(i%1000) + `,"note":"` + scaleNote + `"}`)
	_, err := f.site.API().Send(ctx, "acct", id, "deposit", body, api.Meta{})
	return err
}

// waitMsgs polls stream's message count until it reaches want.
func waitMsgs(ctx context.Context, js jetstream.JetStream, stream string, want uint64, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var have uint64
	for {
		if st, err := js.Stream(ctx, stream); err == nil {
			if have = st.CachedInfo().State.Msgs; have >= want {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s holds %d of %d messages after %s", stream, have, want, timeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stallGap is a pause between two messages stored in a row at the hub
// that counts as a stall (a source waiting on flow control, say).
const stallGap = 100 * time.Millisecond

// timeline reads when stream stored its messages first … last: the first
// and last times, the longest pause between two in a row, and the pauses
// of stallGap or more added up.
func timeline(ctx context.Context, js jetstream.JetStream, stream string, first, last uint64, c *catchUp) error {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: first})
	if err != nil {
		return err
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer it.Stop()
	var prev time.Time
	for seq := first; seq <= last; seq++ {
		m, err := it.Next()
		if err != nil {
			return fmt.Errorf("read %s: %w", stream, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return err
		}
		at := md.Timestamp
		if seq == first {
			c.first = at
		} else if gap := at.Sub(prev); gap > c.maxGap {
			c.maxGap = gap
		}
		if gap := at.Sub(prev); seq > first && gap >= stallGap {
			c.stalled += gap
		}
		prev = at
	}
	c.last = prev
	if c.last.Before(c.first) {
		return errors.New(stream + ": the last message was stored before the first")
	}
	return nil
}

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/node"
)

// Phase names, in the order they run.
const (
	PhaseAppend  = "append"
	PhaseMicro   = "micro"
	PhaseRelay   = "relay"
	PhaseEffects = "effects"
	PhaseE2E     = "e2e"
	PhaseLoad    = "load"
	PhaseReplay  = "replay"
	PhaseProject = "project"
	// PhaseScale runs only when asked for (--phases scale): it fills a
	// store of --decisions decisions.
	PhaseScale = "scale"
	// PhaseEdge runs only when asked for (--phases edge): a hub and a site
	// catch up a backlog of --count decisions (edge.go).
	PhaseEdge = "edge"
)

// AllPhases are the phases a run does by default, in order.
var AllPhases = []string{PhaseAppend, PhaseMicro, PhaseRelay, PhaseEffects, PhaseE2E, PhaseLoad, PhaseReplay, PhaseProject}

// OnDemandPhases run only when --phases names them, after the others.
var OnDemandPhases = []string{PhaseScale, PhaseEdge}

// Defaults.
const (
	DefaultDuration   = 4 * time.Second
	DefaultAggregates = 1000
	DefaultWorkers    = 32
	// drainBatch is how many decisions (relay) or commands (effects) one
	// round fills and drains in duration mode.
	drainBatch = 5000
	// loadEvents is the size of the aggregate the load phase reads cold.
	loadEvents = 1000
	// replayMin is the least log the replay phase reads: it tops the log up
	// to that many decisions first.
	replayMin = 20_000
	// slice is one round of one side in duration mode.
	slice = 500 * time.Millisecond
)

// Options configure a run.
type Options struct {
	// Config is the node's validated configuration. In embedded mode Run
	// overrides the data directory (a temporary one), listens on
	// 127.0.0.1:0 and turns HTTP and the demo off.
	Config config.Config
	// Duration is the measured time per phase (both sides together);
	// ignored when Count > 0.
	Duration time.Duration
	// Count is the number of operations per side per phase.
	Count      int
	Rate       float64
	Aggregates int
	Skew       string
	Workers    int
	// Sweep, when it holds more than one count, runs every phase once per
	// count of concurrent clients, in this order (Workers is then ignored):
	// latency at low load and throughput at high load in one run.
	Sweep  []int
	Phases []string
	// Decisions is the scale phase's fill; 0 means DefaultScaleDecisions.
	Decisions int
	// DataDir, in embedded mode, is the server's data directory instead of
	// a temporary one, and is kept afterwards: a later run with the same
	// DataDir and Decisions reuses the scale phase's fill (see scale.go).
	DataDir string
	// HeapProfile, when set, is where the scale phase writes a heap profile
	// right after its cold loads (after a forced collection): what the
	// node and its server hold live then.
	HeapProfile string
	Version     string
	// Logger receives the node's logs; nil discards them.
	Logger *slog.Logger
	// Progress, when set, is called at the start of each phase; it returns
	// a function taking the phase's progress (0 … 1) and a finish func.
	Progress func(phase string) (update func(float64), finish func())
}

func (o *Options) setDefaults() error {
	if o.Duration <= 0 {
		o.Duration = DefaultDuration
	}
	if o.Aggregates == 0 {
		o.Aggregates = DefaultAggregates
	}
	for _, w := range o.Sweep {
		if w < 1 {
			return fmt.Errorf("--workers %d: need at least 1", w)
		}
	}
	if len(o.Sweep) == 1 {
		o.Workers, o.Sweep = o.Sweep[0], nil
	}
	if len(o.Sweep) > 1 {
		o.Workers = slices.Max(o.Sweep)
	}
	if o.Workers == 0 {
		o.Workers = DefaultWorkers
	}
	if o.Skew == "" {
		o.Skew = SkewUniform
	}
	if len(o.Phases) == 0 {
		o.Phases = AllPhases
	}
	switch {
	case o.HeapProfile != "" && !slices.Contains(o.Phases, PhaseScale):
		return fmt.Errorf("--heapprofile is taken after the scale phase's cold loads: add --phases scale")
	case o.Aggregates < 1:
		return fmt.Errorf("--aggregates %d: need at least 1", o.Aggregates)
	case o.Workers < 1:
		return fmt.Errorf("--workers %d: need at least 1", o.Workers)
	case o.Count < 0:
		return fmt.Errorf("--count %d: must not be negative", o.Count)
	case o.Rate < 0:
		return fmt.Errorf("--rate %g: must not be negative", o.Rate)
	}
	if _, err := NewPicker(o.Skew, o.Aggregates, 1); err != nil {
		return fmt.Errorf("--skew: %w", err)
	}
	known := slices.Concat(AllPhases, OnDemandPhases)
	for _, p := range o.Phases {
		if !slices.Contains(known, p) {
			return fmt.Errorf("--phases: unknown phase %q (phases: %s)", p, strings.Join(known, ","))
		}
	}
	if o.Decisions < 0 {
		return fmt.Errorf("--decisions %d: must not be negative", o.Decisions)
	}
	// Run in the canonical order whatever order they were given in.
	var ordered []string
	for _, p := range known {
		if slices.Contains(o.Phases, p) {
			ordered = append(ordered, p)
		}
	}
	o.Phases = ordered
	return nil
}

// Run starts (or connects to) the server, runs the phases one after
// another and returns the report. A failing phase is reported with its
// error and the run goes on; Run fails only when it cannot start.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	if opts.HeapProfile != "" {
		// Fail now, not after a fill of hours.
		f, err := os.Create(opts.HeapProfile)
		if err != nil {
			return nil, fmt.Errorf("--heapprofile: %w", err)
		}
		_ = f.Close()
	}
	started := time.Now()
	cfg := opts.Config
	cfg.HTTP.Listen = config.ListenNone
	cfg.Demo.Services = false
	// The node's only worker: a no-op Go handler for charge (e2e), with one
	// worker per client.
	cfg.Workers = map[string]config.Worker{"charge": {Target: config.TargetGo, Pool: opts.Workers}}
	embedded := cfg.NATS.Mode == config.ModeEmbedded
	if embedded {
		dir := opts.DataDir
		if dir == "" {
			tmp, err := os.MkdirTemp("", "esjet-bench-")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(tmp)
			dir = tmp
		} else if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		cfg.NATS.Embedded.DataDir = dir
		cfg.NATS.Embedded.Listen = "127.0.0.1:0"
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &env{opts: opts, cfg: cfg, ns: cfg.Namespace}
	if !embedded {
		// Never write into (let alone delete) a namespace that holds data.
		if err := refuseExisting(ctx, cfg, e.ns, e.ns+"_raw"); err != nil {
			return nil, err
		}
	}
	n, err := node.Start(ctx, cfg, node.Options{OwnsProcess: true,
		Logger: opts.Logger, Aggregates: []*aggregate.Definition{Account()}, Version: opts.Version,
		Handlers: map[string]consumer.Handler{"charge": consumer.HandlerFunc(noop)},
	})
	if err != nil {
		return nil, err
	}
	e.node, e.nodeJS = n, n.JetStream()
	cfg = n.Config() // streams.replicas as the node decided it
	e.cfg = cfg
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if !embedded {
			for _, ns := range append([]string{e.ns}, e.extra...) {
				deleteNamespace(cctx, e.nodeJS, ns, cfg)
			}
		}
		_ = n.Close(cctx)
	}()
	if err := e.connectTCP(ctx); err != nil {
		return nil, err
	}
	defer e.tcp.Close()
	if err := e.setupRaw(ctx); err != nil {
		return nil, err
	}
	if slices.Contains(opts.Phases, PhaseAppend) || slices.Contains(opts.Phases, PhaseEffects) {
		closeSQLite, err := e.setupSQLite()
		if err != nil {
			return nil, err
		}
		defer closeSQLite()
	}

	rep := &Report{
		Version: opts.Version, GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		Started: started.UTC().Format(time.RFC3339),
		Server:  Server{Embedded: embedded, Sync: cfg.NATS.Embedded.Sync, Replicas: cfg.Streams.Replicas, Namespace: e.ns},
		Params:  Params{Count: opts.Count, Rate: opts.Rate, Aggregates: opts.Aggregates, Skew: opts.Skew, Workers: opts.Workers, Phases: opts.Phases},
	}
	if opts.Count == 0 {
		rep.Params.DurationSeconds = opts.Duration.Seconds()
	}
	if !embedded {
		rep.Server.Sync = "cluster"
		rep.Server.URL = redact(cfg.NATS.External.URLs)
	}
	rep.Params.Sweep = opts.Sweep
	counts := opts.Sweep
	if len(counts) == 0 {
		counts = []int{opts.Workers}
	}
	for _, name := range opts.Phases {
		for _, w := range counts {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			e.opts.Workers = w
			label := name
			if len(opts.Sweep) > 0 {
				label += " ×" + strconv.Itoa(w)
			}
			update, finish := func(float64) {}, func() {}
			if opts.Progress != nil {
				update, finish = opts.Progress(label)
			}
			phases, err := e.runPhase(ctx, name, update)
			finish()
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				phases = append(phases, Phase{Name: name, Description: describe[name], Error: err.Error()})
			}
			if len(opts.Sweep) > 0 {
				for i := range phases {
					phases[i].Workers = w
				}
			}
			rep.Phases = append(rep.Phases, phases...)
		}
	}
	rep.Scale = e.scale
	rep.Notes = notes(rep, opts)
	rep.Seconds = time.Since(started).Seconds()
	return rep, nil
}

var describe = map[string]string{
	PhaseAppend:  "commands through the Go API vs raw conditional appends on the node's connection",
	PhaseMicro:   "commands through NATS micro from a TCP client vs raw conditional appends from a TCP client",
	PhaseRelay:   "the relay draining recorded decisions to OUTBOX vs raw consume + publish + ack of the same messages",
	PhaseEffects: "workers with a no-op handler draining OUTBOX vs raw fetch + ack of the same messages",
	PhaseE2E:     "command → relay → worker → outcome recorded on the aggregate (no raw pair)",
	PhaseLoad:    "cold load of a 1,000-event aggregate (cache off) vs raw batched direct get of its messages",
	PhaseReplay:  "Log.ReadFrom of the whole log vs a raw ordered consumer reading it",
	PhaseProject: "a new projection (no-op handler) catching up over the whole log vs a raw ordered consumer reading it",
	PhaseScale:   "a store of --decisions decisions: bytes, reconcile, outbox lookup, cold loads and memory",
	PhaseEdge:    "an edge hub catching up a site's offline backlog of --count decisions vs raw sourcing of the same messages across a leaf link",
}

// phaseRuns are the phases' bodies, one file each.
var phaseRuns = map[string]func(e *env, ctx context.Context, progress func(float64)) ([]Phase, error){
	PhaseAppend:  (*env).appendPhase,
	PhaseMicro:   (*env).microPhase,
	PhaseRelay:   (*env).relayPhase,
	PhaseEffects: (*env).effectsPhase,
	PhaseE2E:     (*env).e2ePhase,
	PhaseLoad:    (*env).loadPhase,
	PhaseReplay:  (*env).replayPhase,
	PhaseProject: (*env).projectPhase,
	PhaseScale:   (*env).scalePhase,
	PhaseEdge:    (*env).edgePhase,
}

func (e *env) runPhase(ctx context.Context, name string, progress func(float64)) ([]Phase, error) {
	run, ok := phaseRuns[name]
	if !ok {
		return nil, fmt.Errorf("unknown phase %q", name)
	}
	return run(e, ctx, progress)
}

func noop(context.Context, consumer.Delivery) (json.RawMessage, error) { return nil, nil }

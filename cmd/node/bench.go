package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/esjet/esjet/internal/bench"
)

const benchLong = `Run esjet's hot paths one after another on the same server, each beside raw
JetStream doing the same work, interleaved round by round so both share the
machine's noise, and print throughput, latency percentiles and the ratio
esjet/raw per phase:

  append   commands through the Go API vs raw conditional appends (same
           message, same per-subject expectation, same concurrency) on the
           node's connection
  micro    commands through NATS micro from a TCP client vs raw appends
           from a TCP client
  relay    the relay draining recorded decisions vs raw consume + publish +
           ack of the same messages
  effects  workers with a no-op handler vs raw fetch + ack
  e2e      command → relay → worker → outcome recorded (no raw pair)
  load     cold load of a 1,000-event aggregate, snapshots off and on, vs
           raw batched direct get
  replay   Log.ReadFrom of the whole log vs a raw ordered consumer
  project  a new projection (no-op handler) catching up over the whole log
           vs a raw ordered consumer
  scale    only when named: fill --decisions decisions, then print bytes
           per decision, reconcile time and memory, the oldest command's
           lookup, cold loads and memory (see docs/PERFORMANCE.md, "At scale")
  edge     only when named: an edge hub and a site (two nodes, leaf-linked,
           in this process) — the site records --count decisions (default
           20,000) while the hub is away, then the hub catches up; vs raw
           sourcing of the same messages across a leaf link (see
           docs/PERFORMANCE.md, "Edge catch-up")

By default a node starts in-process on a temporary data directory (removed
afterwards), NATS on 127.0.0.1:<random>, HTTP off; --sync picks its fsync
mode (the config's default is "always"). With --url the phases run on that
cluster in namespace "bench" (or --namespace), which must not exist yet and
is deleted afterwards.

Absolute numbers drift on a shared machine; the ratios are the figures to
compare between runs.`

const benchExample = `  esjet bench
  esjet bench --sync interval --phases append,micro --skew zipf
  esjet bench --phases append,effects --workers 1,32,256
  esjet bench --phases edge --count 20000
  esjet bench --rate 2000 --duration 10s --phases append,e2e
  esjet bench --json --no-progress > bench.json
  esjet bench --url nats://a:4222,nats://b:4222 --namespace bench-tmp`

// benchFlags are the flags of `esjet bench`.
type benchFlags struct {
	opts               bench.Options
	asJSON, noProgress bool
	svgPath            string
	cpuProfile         string // --cpuprofile: a pprof CPU profile of the whole run
	phases             []string
	workers            []int
	nodes              []int // --nodes: the fleet run (internal/bench/fleet.go)
}

func newBenchCmd(g *globals) *cobra.Command {
	var b benchFlags
	cmd := &cobra.Command{
		Use:     "bench",
		Short:   "Measure esjet against raw JetStream on this machine, phase by phase, in one run",
		Long:    benchLong,
		Example: benchExample,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, args []string) error { return b.run(cmd, g) },
	}
	b.register(cmd.Flags())
	return cmd
}

func (b *benchFlags) register(f *pflag.FlagSet) {
	f.DurationVar(&b.opts.Duration, "duration", bench.DefaultDuration, "measured time per phase, both sides together")
	f.IntVar(&b.opts.Count, "count", 0, "operations per side per phase instead of --duration (relay, effects: messages drained; edge: the offline backlog, default 20000); 0: run for --duration")
	f.Float64Var(&b.opts.Rate, "rate", 0, "fixed arrival rate in operations/s for append, micro and e2e (latency from the scheduled time); 0: as fast as possible")
	f.IntVar(&b.opts.Aggregates, "aggregates", bench.DefaultAggregates, "aggregates the append and micro phases spread commands over")
	f.StringVar(&b.opts.Skew, "skew", bench.SkewUniform, "how commands pick aggregates: uniform or zipf (hot aggregates)")
	f.IntSliceVar(&b.workers, "workers", []int{bench.DefaultWorkers}, "concurrent clients (and worker pool size); several (1,32,256) run every phase once per count")
	f.StringSliceVar(&b.phases, "phases", bench.AllPhases, "phases to run, comma-separated (also on demand: scale, edge)")
	f.IntVar(&b.opts.Decisions, "decisions", 0, "decisions the scale phase fills the store with (0: 100000)")
	f.BoolVar(&b.asJSON, "json", false, "print the report as JSON")
	f.BoolVar(&b.noProgress, "no-progress", false, "no progress bars (they are also off with --json or when stderr is not a terminal)")
	f.IntSliceVar(&b.nodes, "nodes", nil, "fleet run instead of the phases: node processes sharing one namespace on the --url cluster, e.g. 1,2,4; --count trips each (default 2000)")
	f.StringVar(&b.svgPath, "svg", "", "also write a chart of the latency percentiles per phase to this SVG file")
	f.StringVar(&b.cpuProfile, "cpuprofile", "", "write a CPU profile of the run (client, node and embedded server share the process) to this file, for go tool pprof")
	f.StringVar(&b.opts.HeapProfile, "heapprofile", "", "with the scale phase: write a heap profile taken right after its cold loads (what the node and the server hold live) to this file, for go tool pprof")
}

// run runs the bench and writes its report: a table, or JSON with --json,
// and with --svg a chart.
func (b *benchFlags) run(cmd *cobra.Command, g *globals) error {
	opts, err := b.options(cmd, g)
	if err != nil {
		return err
	}
	if len(b.nodes) > 0 {
		if opts.HeapProfile != "" {
			return fmt.Errorf("--heapprofile is taken in the scale phase, which a fleet run (--nodes) does not run")
		}
		return b.runFleet(cmd, g, opts)
	}
	if b.cpuProfile != "" {
		stop, err := startCPUProfile(b.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	rep, err := bench.Run(cmd.Context(), opts)
	if err != nil {
		return err
	}
	if b.svgPath != "" {
		if err := writeSVG(rep, b.svgPath); err != nil {
			return err
		}
	}
	if b.asJSON {
		return rep.WriteJSON(g.stdout)
	}
	return rep.WriteTable(g.stdout)
}

// options are the run's bench.Options: the loaded config in namespace
// "bench" unless --namespace says otherwise, logging at warn unless
// --log-level says otherwise, the phases asked for, progress bars on a
// terminal.
func (b *benchFlags) options(cmd *cobra.Command, g *globals) (bench.Options, error) {
	flags := cmd.Flags()
	if flags.Changed("count") && flags.Changed("duration") {
		return bench.Options{}, fmt.Errorf("--count and --duration: give one of them")
	}
	cfg, err := g.load(flags)
	if err != nil {
		return bench.Options{}, err
	}
	if !flags.Changed("namespace") {
		cfg.Namespace = "bench"
	}
	if !flags.Changed("log-level") {
		cfg.Log.Level = "warn"
	}
	opts := b.opts
	opts.Config = cfg
	if flags.Changed("data-dir") { // kept afterwards; a scale run reuses its fill
		opts.DataDir = cfg.NATS.Embedded.DataDir
	}
	opts.Version = semver()
	opts.Logger = newLogger(cfg, g.stderr)
	opts.Sweep = b.workers
	opts.Phases = nil
	for _, p := range b.phases {
		if p = strings.TrimSpace(p); p != "" {
			opts.Phases = append(opts.Phases, p)
		}
	}
	if len(opts.Phases) == 0 {
		return bench.Options{}, fmt.Errorf("--phases %q names no phase: give one or more of %s (or leave the flag out for the default set)",
			strings.Join(b.phases, ","), strings.Join(slices.Concat(bench.AllPhases, bench.OnDemandPhases), ", "))
	}
	if !b.noProgress && !b.asJSON && isTerminal(g.stderr) {
		opts.Progress = func(phase string) (func(float64), func()) { return phaseBar(g.stderr, phase) }
	}
	return opts, nil
}

// phaseBar draws a phase's progress (0 … 1) on w until finish.
func phaseBar(w io.Writer, phase string) (update func(float64), finish func()) {
	bar := progressbar.NewOptions(100,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(fmt.Sprintf("%-8s", phase)),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
	return func(f float64) { _ = bar.Set(int(f * 100)) }, func() { _ = bar.Finish() }
}

// startCPUProfile profiles the process's CPU into path until stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("--cpuprofile %s: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

func writeSVG(rep *bench.Report, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.WriteSVG(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// runFleet is `esjet bench --nodes …`: node processes on the cluster.
func (b *benchFlags) runFleet(cmd *cobra.Command, g *globals, opts bench.Options) error {
	rows, err := bench.RunFleet(cmd.Context(), bench.FleetOptions{
		Config: opts.Config, Nodes: b.nodes, Trips: opts.Count, Clients: slices.Max(append([]int{0}, b.workers...)), Log: g.stderr,
	})
	if err != nil {
		return err
	}
	if b.asJSON {
		return bench.WriteFleetJSON(g.stdout, rows)
	}
	return bench.WriteFleetTable(g.stdout, rows)
}

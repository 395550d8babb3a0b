package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/esjet/esjet/internal/bench"
)

func newBenchCmd(g *globals) *cobra.Command {
	var (
		opts               bench.Options
		asJSON, noProgress bool
		svgPath            string
		phases             []string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure esjet against raw JetStream on this machine, phase by phase, in one run",
		Long: `Run esjet's hot paths one after another on the same server, each beside raw
JetStream doing the same work, interleaved round by round so both share the
machine's noise, and print throughput, latency percentiles and the ratio
esjet/raw per phase:

  append   commands through the Go API vs raw conditional appends (same
           message, same per-subject expectation, same concurrency) on the
           node's connection
  micro    commands through NATS micro from a TCP client vs raw appends
           from a TCP client
  relay    the relay draining recorded decisions vs raw consume + publish +
           AckAll of the same messages
  effects  workers with a no-op handler vs raw fetch + ack
  e2e      command → relay → worker → outcome recorded (no raw pair)
  load     cold load of a 1,000-event aggregate, snapshots off and on, vs
           raw batched direct get
  replay   Log.ReadFrom of the whole log vs a raw ordered consumer

By default a node starts in-process on a temporary data directory (removed
afterwards), NATS on 127.0.0.1:<random>, HTTP off; --sync picks its fsync
mode (the config's default is "always"). With --url the phases run on that
cluster in namespace "bench" (or --namespace), which must not exist yet and
is deleted afterwards.

Absolute numbers drift on a shared machine; the ratios are the figures to
compare between runs.`,
		Example: `  esjet bench
  esjet bench --sync interval --phases append,micro --skew zipf
  esjet bench --rate 2000 --duration 10s --phases append,e2e
  esjet bench --json --no-progress > bench.json
  esjet bench --url nats://a:4222,nats://b:4222 --namespace bench-tmp`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.load(cmd.Flags())
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("namespace") {
				cfg.Namespace = "bench"
			}
			if !cmd.Flags().Changed("log-level") {
				cfg.Log.Level = "warn"
			}
			if cmd.Flags().Changed("count") && cmd.Flags().Changed("duration") {
				return fmt.Errorf("--count and --duration: give one of them")
			}
			opts.Config = cfg
			opts.Version = semver()
			opts.Logger = newLogger(cfg, g.stderr)
			opts.Phases = nil
			for _, p := range phases {
				if p = strings.TrimSpace(p); p != "" {
					opts.Phases = append(opts.Phases, p)
				}
			}
			if !noProgress && !asJSON && isTerminal(g.stderr) {
				opts.Progress = func(phase string) (func(float64), func()) {
					bar := progressbar.NewOptions(100,
						progressbar.OptionSetWriter(g.stderr),
						progressbar.OptionSetDescription(fmt.Sprintf("%-8s", phase)),
						progressbar.OptionSetPredictTime(false),
						progressbar.OptionThrottle(100*time.Millisecond),
						progressbar.OptionClearOnFinish(),
					)
					return func(f float64) { _ = bar.Set(int(f * 100)) }, func() { _ = bar.Finish() }
				}
			}
			rep, err := bench.Run(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if svgPath != "" {
				f, err := os.Create(svgPath)
				if err != nil {
					return err
				}
				if err := rep.WriteSVG(f); err != nil {
					_ = f.Close()
					return err
				}
				if err := f.Close(); err != nil {
					return err
				}
			}
			if asJSON {
				return rep.WriteJSON(g.stdout)
			}
			return rep.WriteTable(g.stdout)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&opts.Duration, "duration", bench.DefaultDuration, "measured time per phase, both sides together")
	f.IntVar(&opts.Count, "count", 0, "operations per side per phase instead of --duration (relay, effects: messages drained)")
	f.Float64Var(&opts.Rate, "rate", 0, "fixed arrival rate in operations/s for append, micro and e2e (latency from the scheduled time); 0: as fast as possible")
	f.IntVar(&opts.Aggregates, "aggregates", bench.DefaultAggregates, "aggregates the append and micro phases spread commands over")
	f.StringVar(&opts.Skew, "skew", bench.SkewUniform, "how commands pick aggregates: uniform or zipf (hot aggregates)")
	f.IntVar(&opts.Workers, "workers", bench.DefaultWorkers, "concurrent clients (and worker pool size)")
	f.StringSliceVar(&phases, "phases", bench.AllPhases, "phases to run, comma-separated")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.BoolVar(&noProgress, "no-progress", false, "no progress bars (they are also off with --json or when stderr is not a terminal)")
	f.StringVar(&svgPath, "svg", "", "also write a chart of the latency percentiles per phase to this SVG file")
	return cmd
}

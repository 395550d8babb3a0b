package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"time"

	"github.com/spf13/cobra"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/demo/services"
	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/node"
)

// shutdownGrace bounds the drain and server shutdown after SIGINT/SIGTERM.
const shutdownGrace = 15 * time.Second

func newRunCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run the node (the default command)",
		Long: `Run the node: start the embedded nats-server (or connect to an external
cluster), provision the namespace's streams and buckets, and serve until
SIGINT or SIGTERM, then drain and shut down cleanly.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runNode(cmd, g) },
	}
}

func runNode(cmd *cobra.Command, g *globals) error {
	g.runsNode = true
	cfg, err := g.load(cmd.Flags())
	if err != nil {
		return err
	}
	logger := newLogger(cfg, g.stderr)
	ctx := cmd.Context()
	routed := cfg.Workers
	cfg.Workers = tripRoutes(cfg)
	if !cfg.Demo.Services && len(cfg.Workers) > len(routed) {
		logger.Info("demo services are off: the trip's commands go to " + services.SubjectAll +
			"; run `esjet demo-services` beside this node, or route workers.<kind> elsewhere in the config")
	}
	def := trip.Definition()
	if cfg.Demo.Build == config.DemoBuildNext {
		def = trip.NextDefinition()
	}
	n, err := node.Start(ctx, cfg, node.Options{Logger: logger, OwnsProcess: true, Aggregates: []*aggregate.Definition{def}, Version: version(),
		Projections: trip.Views()})
	if err != nil {
		return err
	}
	if cfg.Demo.Services {
		svc, err := services.Start(ctx, n.Broker().Conn(), n.JetStream(), services.Options{}, logger)
		if err != nil {
			_ = n.Close(context.WithoutCancel(ctx))
			return fmt.Errorf("start demo services: %w", err)
		}
		n.OnClose(func() { _ = svc.Close() })
	}
	printReady(g.stdout, cfg, n)
	return n.Run(ctx, shutdownGrace)
}

// printReady prints the line a user (and the tests) wait for.
func printReady(w io.Writer, cfg config.Config, n *node.Node) {
	natsURL := n.Broker().ClientURL()
	if natsURL == "" {
		natsURL = "(in-process only)"
	}
	httpURL := "(disabled)"
	if a := n.HTTPAddr(); a != "" {
		httpURL = "http://" + a
		if cfg.HTTP.TLS.CertFile != "" {
			httpURL = "https://" + a
		}
	}
	fmt.Fprintf(w, "esjet %s ready: namespace %s, nats %s, http %s\n", version(), cfg.Namespace, natsURL, httpURL)
}

// tripRoutes returns workers with the trip's command kinds routed to the
// demo services on demo.svc.> where workers does not route them elsewhere.
// With the services in this process (demo.services) every kind the config
// leaves out goes to them. Without, the routes are the default of a config
// that routes none of the trip's kinds (`esjet demo-services` beside the
// node answers them); a config that routes some of them owns the trip's
// routing — the rest are another node's, and the node warns about them.
func tripRoutes(cfg config.Config) map[string]config.Worker {
	workers := cfg.Workers
	if !cfg.Demo.Services {
		for kind := range services.KindSubjects {
			if _, ok := workers[kind]; ok {
				return workers
			}
		}
		for kind := range services.NextKindSubjects {
			if _, ok := workers[kind]; ok {
				return workers
			}
		}
	}
	out := map[string]config.Worker{}
	next := cfg.Demo.Build == config.DemoBuildNext
	schemas := trip.WorkerSchemas(next)
	for kind, subject := range services.KindSubjects {
		// The demo's services read every payload schema the trip issues.
		out[kind] = config.Worker{Target: config.TargetNATS, Subject: subject, Schema: schemas[kind]}
	}
	if next { // the kinds the next shape adds: today's build serves none
		for kind, subject := range services.NextKindSubjects {
			out[kind] = config.Worker{Target: config.TargetNATS, Subject: subject}
		}
	}
	maps.Copy(out, workers)
	return out
}

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/demo/services"
	"github.com/esjet/esjet/internal/broker"
)

func newDemoServicesCmd(g *globals) *cobra.Command {
	var fails, slows []string
	cmd := &cobra.Command{
		Use:   "demo-services",
		Short: "Run the trip demo's budget, flights and hotels services (NATS request handlers on demo.svc.>)",
		Long: `Run the "outside world" of the trip demo: a budget service and two suppliers
that esjet's workers call by NATS request on demo.svc.> (queue group
demo-services). Each repeated delivery of one command performs its effect
once (idempotency receipts in the KV bucket demo_services_receipts).

Make a service fail on demand, at start with --fail/--slow, or at runtime:
  nats req demo.svc.control '{"service":"flights","mode":"transient","count":2}'
Modes: ok, transient (retryable "supplier busy"), terminal (budget refused /
no seats / no rooms), slow (sleep, then answer). A count makes the mode apply
to the next N requests only. Flights to "Atlantis" always fail with "no seats".

Runs until SIGINT or SIGTERM. It waits for NATS if the node is not up yet
and reconnects for ever when the node restarts.`,
		Example: `  esjet demo-services
  esjet demo-services --fail flights=terminal --fail hotels=transient:2 --slow budget=3s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := demoModes(fails, slows)
			if err != nil {
				return err
			}
			cfg, err := g.load(cmd.Flags())
			if err != nil {
				return err
			}
			return g.serveDemo(cmd.Context(), cfg, opts)
		},
	}
	cmd.Flags().StringArrayVar(&fails, "fail", nil, "service=mode[:count]: make budget, flights or hotels fail (transient or terminal), for count requests or until changed")
	cmd.Flags().StringArrayVar(&slows, "slow", nil, "service=delay[:count]: make a service sleep before answering")
	return cmd
}

// demoModes parses the --fail and --slow flags into the services' modes,
// reporting every bad one at once.
func demoModes(fails, slows []string) (services.Options, error) {
	opts := services.Options{Fail: map[string]services.Mode{}}
	var problems []error
	add := func(parse func(string) (string, services.Mode, error), specs []string) {
		for _, spec := range specs {
			name, m, err := parse(spec)
			if err == nil {
				if _, dup := opts.Fail[name]; dup {
					err = fmt.Errorf("%s: the mode of %s given twice; give one --fail or --slow per service", spec, name)
				}
			}
			if err != nil {
				problems = append(problems, err)
				continue
			}
			opts.Fail[name] = m
		}
	}
	add(services.ParseFail, fails)
	add(services.ParseSlow, slows)
	return opts, errors.Join(problems...)
}

// serveDemo connects, starts the services and serves until ctx ends or the
// connection closes.
func (g *globals) serveDemo(ctx context.Context, cfg config.Config, opts services.Options) error {
	logger := newLogger(cfg, g.stderr)
	nc, err := broker.Connect(ctx, cfg, "esjet demo-services", reconnectForever(logger)...)
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := waitConnected(ctx, nc, logger); err != nil {
		return err
	}
	lost := closed(nc)
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	svc, err := services.Start(cctx, nc, js, opts, logger)
	if err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "demo services ready on %s (nats %s)\n", services.SubjectAll, nc.ConnectedUrlRedacted())
	select {
	case <-ctx.Done():
	case <-lost:
		_ = svc.Close()
		return errors.New("demo-services: the connection to NATS closed")
	}
	return svc.Close()
}

// reconnectForever makes the demo services outlive a node restart (or start
// before the node): they stand beside a node a user restarts at will, and
// their subscriptions come back with the connection.
func reconnectForever(logger *slog.Logger) []nats.Option {
	return []nats.Option{
		func(o *nats.Options) error { o.AllowReconnect = true; return nil }, // broker.Connect turns it off
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			logger.Warn("disconnected from NATS; reconnecting until it is back", "error", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			logger.Info("reconnected to NATS", "url", nc.ConnectedUrlRedacted())
		}),
	}
}

// waitConnected returns once nc is connected, or when ctx ends: with
// RetryOnFailedConnect, Connect returns before a server answers.
func waitConnected(ctx context.Context, nc *nats.Conn, logger *slog.Logger) error {
	changed := nc.StatusChanged(nats.CONNECTED)
	defer nc.RemoveStatusListener(changed)
	if nc.IsConnected() {
		return nil
	}
	logger.Warn("NATS does not answer yet; waiting for it (is `esjet run` running?)", "servers", nc.Servers())
	select {
	case <-changed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("demo-services: no NATS server answered before the command was stopped (servers %v; is `esjet run` running?)", nc.Servers())
	}
}

// closed returns a channel closed when nc closes for good (it reconnects for
// ever, so only Close does that).
func closed(nc *nats.Conn) <-chan struct{} {
	ch := make(chan struct{})
	var once sync.Once
	nc.SetClosedHandler(func(*nats.Conn) { once.Do(func() { close(ch) }) })
	if nc.IsClosed() {
		once.Do(func() { close(ch) })
	}
	return ch
}

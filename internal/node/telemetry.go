package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/telemetry"
)

// The node's telemetry: made first (every component gets it), watched once
// everything runs (the figures read at scrape time), /metrics served on the
// HTTP listener or one of its own (http.metrics_listen), closed last.

// startTelemetry makes the node's telemetry.
func (n *Node) startTelemetry(ctx context.Context, opts Options) (err error) {
	n.tel, err = telemetry.New(ctx, telemetry.Config{Namespace: n.cfg.Namespace, SpanProcessor: opts.SpanProcessor, Logger: n.logger})
	return err
}

// Telemetry is the node's metrics registry and tracer.
func (n *Node) Telemetry() *telemetry.Telemetry { return n.tel }

// watchTelemetry registers what the components count, read at scrape
// time, and serves /metrics on its own listener if the config asks.
func (n *Node) watchTelemetry() error {
	err := n.tel.Watch(telemetry.Sources{
		Repository: func() telemetry.RepositoryStats {
			s := n.repo.Stats()
			return telemetry.RepositoryStats{CacheHits: s.CacheHits, ColdLoads: s.ColdLoads, SnapshotHits: s.SnapshotHits,
				SnapshotsWritten: s.SnapshotsWritten, Conflicts: s.Conflicts, Replays: s.Replays, OutcomesRefused: s.OutcomesRefused,
				RecordsRead: s.RecordsRead, TailReads: s.TailReads, Cached: s.Cached, ArchiveReads: n.log.ArchiveReads()}
		},
		Relay: func() telemetry.RelayStats {
			if n.relay == nil {
				return telemetry.RelayStats{} // an edge hub runs no relay
			}
			s := n.relay.Stats()
			return telemetry.RelayStats{Decisions: s.Decisions, Commands: s.Commands, Duplicates: s.Duplicates, Scheduled: s.Scheduled,
				Failures: s.Failures, Undecodable: s.Undecodable, Scanned: s.Scanned}
		},
		Workers: func() []telemetry.WorkerStats {
			out := make([]telemetry.WorkerStats, 0, len(n.workers))
			for _, w := range n.workers {
				s := w.Stats()
				out = append(out, telemetry.WorkerStats{Kind: w.Kind(), Pool: w.Pool(), Done: s.Done, Retried: s.Retried, Dead: s.Dead,
					Skipped: s.Skipped, Poison: s.Poison, FeedbackErrors: s.FeedbackErrors, Stale: s.Stale,
					UnreadReceipts: s.UnreadReceipts, Paused: s.Paused, RateWaiting: s.RateWaiting, RateWaits: s.RateWaits,
					KeyWaiting: s.KeyWaiting, KeyWaits: s.KeyWaits, Deferred: s.Deferred})
			}
			return out
		},
		Projections: n.projectionMetrics,
		NewerWaiting: func(ctx context.Context) (map[string]int, error) {
			if n.control == nil {
				return nil, nil
			}
			return n.control.Waiting(ctx)
		},
		Conn:      n.broker.Conn(),
		JetStream: n.broker.JetStream(),
		Namespace: n.cfg.Namespace,
	})
	if err != nil {
		return err
	}
	if l := n.cfg.HTTP.MetricsListen; l != "" && l != config.ListenNone {
		return n.startMetricsListener(l)
	}
	return nil
}

// projectionMetrics reads each read model's lag, as `esjet projections ls`
// does (what it cannot read is left out of the scrape).
func (n *Node) projectionMetrics(ctx context.Context) []telemetry.ProjectionLag {
	if n.views == nil {
		return nil
	}
	all, err := n.views.All(ctx)
	if err != nil {
		n.logger.Debug("projection lag not read for /metrics", "error", err)
		return nil
	}
	out := make([]telemetry.ProjectionLag, 0, len(all))
	for _, st := range all {
		out = append(out, telemetry.ProjectionLag{Name: st.Name, Pending: st.Lag, Lag: time.Duration(st.LagSeconds * float64(time.Second)),
			Parked: st.Parked, Health: st.Health})
	}
	return out
}

// metricsOnAPI says whether /metrics is served beside the API.
func (n *Node) metricsOnAPI() bool { return n.cfg.HTTP.MetricsListen == "" }

// startMetricsListener serves /metrics alone on addr.
func (n *Node) startMetricsListener(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: %w", &config.ListenError{Setting: "http.metrics_listen", Addr: addr, Err: err})
	}
	n.metricsAddr = ln.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", n.tel.Handler())
	n.metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		if err := n.metricsSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.logger.Error("metrics listener stopped", "addr", n.metricsAddr, "error", err)
		}
	}()
	return nil
}

// MetricsAddr is where /metrics is served on a listener of its own ("" when
// it is on the HTTP listener, or nowhere).
func (n *Node) MetricsAddr() string { return n.metricsAddr }

// closeTelemetry stops the metrics listener and flushes the traces.
func (n *Node) closeTelemetry(ctx context.Context) error {
	var errs []error
	if n.metricsSrv != nil {
		errs = append(errs, n.metricsSrv.Shutdown(ctx))
	}
	if err := n.tel.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("flush traces: %w", err))
	}
	return errors.Join(errs...)
}

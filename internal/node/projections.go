package node

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nuid"

	"github.com/esjet/esjet/internal/broker"
	"github.com/esjet/esjet/internal/projection"
)

// Every node serves the views' queries (they read the buckets); a node
// given projections also runs them, sharing their partitions with the
// other nodes that run the same ones (a lease per partition).

// startProjections starts the runner of opts.Projections, if any.
func (n *Node) startProjections(ctx context.Context, opts Options, logger *slog.Logger) error {
	if len(opts.Projections) == 0 {
		return nil
	}
	// With NATS users the node role has no permissions on the view buckets
	// yet (<ns>_projections, <ns>_view_<name>): run no read models rather
	// than hit permission violations.
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	id, werr := broker.WhoAmI(wctx, n.broker.Conn())
	wcancel()
	if werr != nil || id.User != "" {
		n.logger.Warn("projections not started: the server has NATS users, and the node role has no permissions on the view buckets yet", "user", id.User)
		return nil
	}
	host, _ := os.Hostname()
	cfg := projection.Config{NodeID: host + "-" + strconv.Itoa(os.Getpid()) + "-" + nuid.Next()[:6], Replicas: n.cfg.Streams.Replicas}
	nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := projection.NewRunner(nctx, n.broker.JetStream(), n.log, opts.Projections, cfg, logger)
	if err != nil {
		// The node serves commands without its read models rather than not
		// at all; with NATS users the node role has no permissions on the
		// view buckets yet (<ns>_projections, <ns>_view_<name>).
		n.logger.Error("projections not started: the node runs without its read models", "error", err)
		return nil
	}
	n.projections = r
	pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	n.projectionsStop, n.projectionsDone = stop, make(chan error, 1)
	go func() { n.projectionsDone <- n.watch(pctx, "projections", r.Run(pctx)) }()
	return nil
}

// stopProjections stops the runner: each partition stores its batch and
// lets its lease go.
func (n *Node) stopProjections(ctx context.Context) error {
	if n.projectionsStop == nil {
		return nil
	}
	n.projectionsStop()
	waited := make(chan struct{})
	go func() { <-n.projectionsDone; close(waited) }()
	return n.await(ctx, "the projections to store their batches", waited)
}

// Views answers the views' queries and the operators' actions.
func (n *Node) Views() *projection.Views { return n.views }

// Projections is the node's projection runner (nil when it runs none):
// Progress reports each owned partition's position and lag.
func (n *Node) Projections() *projection.Runner { return n.projections }

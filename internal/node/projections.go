package node

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nuid"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/projection"
)

// Every node serves the views' queries (they read the buckets); a node
// given projections also runs them, sharing their partitions with the
// other nodes that run the same ones (a lease per partition).

// viewNames are the names of the projections with the built-in store (a
// Sink keeps its view elsewhere): with NATS users, the node role may write
// their buckets (broker.WithViews).
func viewNames(defs []projection.Definition) []string {
	var names []string
	for _, d := range defs {
		if d.Sink == nil {
			names = append(names, d.Name)
		}
	}
	return names
}

// ProjectionConfig maps the node config to the projection runner's (its
// NodeID left for the node to name).
func ProjectionConfig(cfg config.Config) projection.Config {
	return projection.Config{Replicas: cfg.Streams.Replicas,
		LeaseTTL: cfg.Projections.LeaseTTL.Std(), Heartbeat: cfg.Projections.Heartbeat.Std(),
		UnservedMaxAge: cfg.Streams.UnservedViewsMaxAge.Std()}
}

// newNodeID names this node in leases: host, pid and a random suffix (a
// node restarted with the same pid is another owner).
func newNodeID() string {
	host, _ := os.Hostname()
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + nuid.Next()[:6]
}

// startProjections starts the runner of opts.Projections, if any. A runner
// that cannot start (its buckets cannot be made or read yet: an R3 bucket
// on a cluster that formed a moment ago may not answer in time) is tried
// again in the background with backoff until it starts or the node stops;
// meanwhile the node serves commands and /readyz says the read models wait.
func (n *Node) startProjections(ctx context.Context, opts Options, logger *slog.Logger) error {
	if len(opts.Projections) == 0 {
		return nil
	}
	cfg := ProjectionConfig(n.cfg)
	cfg.NodeID = newNodeID()
	newRunner := func(ctx context.Context) (*projection.Runner, error) {
		nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return projection.NewRunner(nctx, n.broker.JetStream(), n.log, opts.Projections, cfg, logger)
	}
	pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	n.projectionsStop, n.projectionsDone = stop, make(chan error, 1)
	r, err := newRunner(ctx)
	if err != nil {
		// The node serves commands without its read models rather than not
		// at all (on a server with users, the node's user may lack the
		// views' permissions: esjet permissions names the views it grants).
		n.logger.Error("projections not started yet: the node runs without its read models and tries again", "error", err,
			"views", viewNames(opts.Projections))
		n.projectionsWaiting(err)
	}
	go func() {
		for try := 1; r == nil; try++ {
			select {
			case <-pctx.Done():
				n.projectionsDone <- nil
				return
			case <-time.After(projectionRetry(try)):
			}
			if r, err = newRunner(pctx); err != nil {
				n.projectionsWaiting(err)
				if try%10 == 0 {
					n.logger.Warn("projections still not started; trying again", "error", err, "tries", try+1)
				}
				continue
			}
			n.projectionsWaiting(nil)
			n.logger.Info("projections started", "tries", try+1, "views", viewNames(opts.Projections))
		}
		n.projectionsDone <- n.watch(pctx, "projections", r.Run(pctx))
	}()
	return nil
}

// projectionRetry is the pause before the try+1th start of the runner:
// 1 s doubling to 30 s.
func projectionRetry(try int) time.Duration {
	return min(time.Second<<min(try-1, 5), 30*time.Second)
}

// projectionsWaiting records why the read models have not started (nil:
// they have), for /readyz.
func (n *Node) projectionsWaiting(err error) {
	n.health.mu.Lock()
	defer n.health.mu.Unlock()
	n.health.projections = err
}

// projectionsNotStarted is why the read models have not started, or nil.
func (n *Node) projectionsNotStarted() error {
	n.health.mu.Lock()
	defer n.health.mu.Unlock()
	return n.health.projections
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

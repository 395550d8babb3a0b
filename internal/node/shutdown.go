package node

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Run blocks until ctx ends or the HTTP server fails, then closes the node
// with a shutdown deadline of grace.
func (n *Node) Run(ctx context.Context, grace time.Duration) error {
	var runErr error
	select {
	case <-ctx.Done():
		n.logger.Info("shutting down", "cause", context.Cause(ctx))
	case runErr = <-n.httpDone:
		if runErr != nil {
			runErr = fmt.Errorf("http server: %w", runErr)
		}
	case <-n.broker.Done(): // the broker refused a server it reconnected to
		runErr = errors.New("nats connection closed")
		if err := n.broker.Err(); err != nil {
			runErr = fmt.Errorf("nats connection closed: %w", err)
		}
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	return errors.Join(runErr, n.Close(cctx))
}

// Close stops the node: first what takes new work in (HTTP, waiting for
// its in-flight requests, then the micro service, waiting for its own),
// then the workers (finishing their in-flight commands, so in-process
// services registered with OnClose still answer them), then the OnClose
// functions (last registered, first run), the relay (finishing its batch in
// hand), and the broker (drain, then the embedded server). Each wait is
// logged with what it waits for; what does not stop by ctx's deadline is
// reported in the error. It is idempotent: later calls return the first
// call's error.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() {
		var errs []error
		if n.httpSrv != nil {
			if k := n.httpInFlight.Load(); k > 0 {
				n.logger.Info(fmt.Sprintf("draining: waiting for %d in-flight HTTP request(s)", k))
			}
			if err := n.httpSrv.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("shut down http: %d request(s) still in flight when the shutdown grace ran out: %w", n.httpInFlight.Load(), err))
			}
		} else if n.httpLn != nil { // Start failed between binding and serving
			_ = n.httpLn.Close()
		}
		if n.micro != nil {
			if k := n.micro.InFlight(); k > 0 {
				n.logger.Info(fmt.Sprintf("draining: waiting for %d in-flight NATS request(s)", k))
			}
			if err := n.micro.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stop micro service: %w", err))
			}
		}
		if n.workersStop != nil {
			n.workersStop() // stop pulling; in-flight handlers finish
			waited := make(chan struct{})
			go func() { n.workersDone.Wait(); close(waited) }()
			if err := n.awaitWorkers(ctx, waited); err != nil {
				errs = append(errs, err)
			}
		}
		if n.control != nil {
			n.control.Stop()
		}
		if err := n.stopProjections(ctx); err != nil {
			errs = append(errs, err)
		}
		if err := n.stopArchiving(ctx); err != nil {
			errs = append(errs, err)
		}
		for i := len(n.onClose) - 1; i >= 0; i-- {
			n.onClose[i]()
		}
		if n.relayStop != nil {
			n.relayStop()
			var relayErr error
			waited := make(chan struct{})
			go func() { relayErr = <-n.relayDone; close(waited) }()
			if err := n.await(ctx, "the relay to finish its batch", waited); err != nil {
				errs = append(errs, err)
			} else if relayErr != nil {
				errs = append(errs, relayErr)
			}
		}
		if n.broker != nil {
			n.logger.Debug("draining: the NATS connection")
			if err := n.broker.Close(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if err := n.closeTelemetry(ctx); err != nil {
			errs = append(errs, err)
		}
		n.closeErr = errors.Join(errs...)
		if n.closeErr == nil {
			n.logger.Info("stopped")
		}
	})
	return n.closeErr
}

// awaitWorkers waits for the workers, naming the kinds still running.
// When the shutdown grace is about to run out (a call in flight waits for
// its target: a receiver holding a crashed attempt's claim may keep it a
// minute), the calls still in flight are abandoned and their commands
// handed back, so the node still stops cleanly within its grace.
func (n *Node) awaitWorkers(ctx context.Context, done <-chan struct{}) error {
	select {
	case <-done:
		return nil
	case <-time.After(100 * time.Millisecond):
	}
	if deadline, ok := ctx.Deadline(); ok {
		left := time.Until(deadline)
		soft, cancel := context.WithTimeout(ctx, left-min(5*time.Second, left/3))
		err := n.awaitWorkersNamed(soft, done)
		cancel()
		if err == nil {
			return nil
		}
		n.logger.Warn("draining: the shutdown grace is running out; handing the commands still in flight back to the stream")
		for _, w := range n.workers {
			w.Abandon()
		}
	}
	return n.awaitWorkersNamed(ctx, done)
}

// awaitWorkersNamed waits for done until ctx ends, naming the kinds whose
// workers hold a command (in a handler, waiting for their turn, or
// recording its outcome). A worker with none is only letting its idle
// pulls run out (consumer.Worker.Run): it is not named.
func (n *Node) awaitWorkersNamed(ctx context.Context, done <-chan struct{}) error {
	var kinds []string
	for _, w := range n.workers {
		if w.InFlight() > 0 {
			kinds = append(kinds, w.Kind())
		}
	}
	sort.Strings(kinds)
	what := "the workers' idle pulls to run out (2s at most)"
	if len(kinds) > 0 {
		what = fmt.Sprintf("the workers of %s to finish their in-flight commands", strings.Join(kinds, ", "))
	}
	return n.await(ctx, what, done)
}

// await waits for done, logging what it waits for when that takes more than
// a moment, and again every few seconds; it gives up when ctx ends.
func (n *Node) await(ctx context.Context, what string, done <-chan struct{}) error {
	select {
	case <-done:
		return nil
	case <-time.After(100 * time.Millisecond):
	}
	n.logger.Info("draining: waiting for " + what)
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-tick.C:
			n.logger.Info("draining: still waiting for " + what)
		case <-ctx.Done():
			return fmt.Errorf("stopping: gave up waiting for %s when the shutdown grace ran out (%v)", what, context.Cause(ctx))
		}
	}
}

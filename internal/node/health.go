package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// health records the node's long-running components (the relay, the
// workers) that stopped on their own. Such a node still answers commands,
// but nothing carries them out: it must say so at once (ERROR) and stop
// reporting ready, not wait for shutdown to mention it.
type health struct {
	mu     sync.Mutex
	failed []error
	// projections is why the read models have not started yet (they are
	// tried again), nil once they have or when there are none.
	projections error
}

// componentFailed is how a component's goroutine reports that its Run
// returned an error the node did not ask for.
func (n *Node) componentFailed(component string, err error) {
	n.logger.Error("component stopped on its own; the node reports not ready until restarted",
		"component_name", component, "error", err)
	n.health.mu.Lock()
	defer n.health.mu.Unlock()
	n.health.failed = append(n.health.failed,
		fmt.Errorf("%s stopped at %s: %w; restart the node", component, time.Now().UTC().Format(time.RFC3339), err))
}

// componentsErr is every component failure so far, or nil.
func (n *Node) componentsErr() error {
	n.health.mu.Lock()
	defer n.health.mu.Unlock()
	return errors.Join(n.health.failed...)
}

// watch passes on what a component's Run returned under ctx, reporting an
// error that came before ctx ended.
func (n *Node) watch(ctx context.Context, component string, err error) error {
	if err != nil && ctx.Err() == nil {
		n.componentFailed(component, err)
	}
	return err
}

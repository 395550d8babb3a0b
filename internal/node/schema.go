package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/streams"
)

// upcasters is how the node's log reads events: the registered types'
// upcasters, the raw types' transforms from the configuration.
func (n *Node) upcasters(cfg config.Config, reg *aggregate.Registry) (streams.Upcaster, error) {
	raw, err := aggregate.RawUpcasts(cfg.Aggregates.Raw)
	if err != nil {
		return nil, err
	}
	u, err := aggregate.NewUpcasters(reg, raw)
	if err != nil {
		return nil, err
	}
	return u.Upcast, nil
}

// refusedReport is what readiness and the console say of the messages the
// node refused to read because a newer build wrote them: the node stays
// ready (it serves every other aggregate), and says which it does not.
func (n *Node) refusedReport() map[string]any {
	if n.log == nil {
		return nil
	}
	count, msgs := n.log.Refused()
	if count == 0 {
		return nil
	}
	return map[string]any{"reads": count, "messages": msgs,
		"note": "a newer build wrote these messages; their aggregates are refused on this node until it is upgraded"}
}

// Refused is what the node refused to read as too new (see [streams.Log.Refused]).
func (n *Node) Refused() (int64, []streams.Refusal) { return n.log.Refused() }

// waitingReport is what readiness says of the commands waiting for a newer
// worker across the fleet (their schema is newer than the workers that
// received them understood): the node stays ready, and says how many wait,
// by kind. Nil when none wait (or the count cannot be read now).
func (n *Node) waitingReport(ctx context.Context) map[string]any {
	if n.control == nil {
		return nil
	}
	byKind, err := n.waiting.get(ctx, n.control)
	if err != nil {
		return nil
	}
	total := 0
	for _, c := range byKind {
		total += c
	}
	if total == 0 {
		return nil
	}
	return map[string]any{"commands": total, "kinds": byKind,
		"note": fmt.Sprintf("%d command(s) waiting for a newer worker: their schema is newer than the workers that received them understand; "+
			"they run once a node that understands them serves their kind (see workers.<kind>.schema)", total)}
}

// waitingCache keeps the fleet's count of commands waiting for a newer
// worker for a second: a probe that polls /readyz does not list the
// workers' bucket every time.
type waitingCache struct {
	mu     sync.Mutex
	at     time.Time
	byKind map[string]int
}

func (c *waitingCache) get(ctx context.Context, ctl interface {
	Waiting(context.Context) (map[string]int, error)
}) (map[string]int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < time.Second {
		return c.byKind, nil
	}
	byKind, err := ctl.Waiting(ctx)
	if err != nil {
		return nil, err
	}
	c.byKind, c.at = byKind, time.Now()
	return byKind, nil
}

package node

import (
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

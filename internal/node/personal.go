package node

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/projection"
	"github.com/esjet/esjet/internal/shred"
	"github.com/esjet/esjet/internal/streams"
)

// Personal data (docs/personal-data.md): the node's keyring, opened on
// first use; the log's reader opens sealed fields before anything else
// sees an event (history, state, views, the console, the raw API); the
// repository seals on append and snapshot; workers open a command's
// payload just before its target gets it.

// startKeys makes the node's keyring; its watch runs until Close.
func (n *Node) startKeys(ctx context.Context, cfg config.Config) {
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	n.keys = &shred.Lazy{JS: n.broker.JetStream(), Namespace: cfg.Namespace, Replicas: cfg.Streams.Replicas, Watch: wctx,
		OnForget: func(string) {
			if n.repo != nil {
				n.repo.Forgotten()
			}
		}}
	n.onClose = append(n.onClose, func() { stop(); n.keys.Wait() })
}

// Keys is the node's keyring (the API's forget uses it).
func (n *Node) Keys() *shred.Lazy { return n.keys }

// opening is the log's reader hook: sealed fields of every record's events
// and commands opened (erased for a forgotten subject).
func opening(keys shred.Keys, cfg config.Config) func(*streams.Record) error {
	s := &shred.Sealer{Keys: keys, KeepUnopened: cfg.Edge.Role == config.EdgeHub}
	return func(rec *streams.Record) error { return s.OpenRecord(context.Background(), rec) }
}

// personalSpecs are the raw types' personal fields from the config, named
// as of each event type's current schema (its upcast steps + 1).
func personalSpecs(cfg config.Config) shred.Registry {
	reg := shred.Registry{}
	for typ, raw := range cfg.Aggregates.Raw {
		for kind, pf := range raw.Personal {
			var s shred.Spec
			for _, f := range pf.Fields {
				s.Fields = append(s.Fields, shred.Field{Name: f, Subject: pf.Subject})
			}
			if ev, ok := raw.Events[kind]; ok && len(ev.Upcast) > 0 {
				s.Schema = len(ev.Upcast) + 1
			}
			reg[typ+"."+kind] = s
		}
	}
	return reg
}

// openingHandler opens a command's personal fields for its target: OUTBOX
// and the DLQ hold them sealed; a forgotten subject's come as null.
type openingHandler struct {
	next consumer.Handler
	s    *shred.Sealer
}

func (h openingHandler) Handle(ctx context.Context, d consumer.Delivery) (json.RawMessage, error) {
	if shred.IsSealed(d.Payload) {
		p, _, err := h.s.OpenJSON(ctx, d.Payload)
		if err != nil {
			return nil, fmt.Errorf("open personal data of command %s: %w", d.CommandID, err)
		}
		d.Payload = p
	}
	return h.next.Handle(ctx, d)
}

// personalViews are the names of the views marked Personal that keep their
// documents in the built-in store: a forget resets them.
func personalViews(defs []projection.Definition) []string {
	var names []string
	for _, d := range defs {
		if d.Personal && d.Handle != nil {
			names = append(names, d.Name)
		}
	}
	return names
}

// plainKinds are the command kinds a site leaves unsealed: its hub's,
// which the hub carries out without the site's keys.
func plainKinds(cfg config.Config) []string {
	if cfg.Edge.Role != config.EdgeSite {
		return nil
	}
	return cfg.Edge.HubKinds
}

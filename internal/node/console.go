package node

import (
	"context"
	"net/http"

	"github.com/esjet/esjet/internal/archive"
	"github.com/esjet/esjet/internal/console"
	"github.com/esjet/esjet/internal/streams"
)

// mountConsole serves the web console at /console on the HTTP listener
// (console.allow_actions turns on its DLQ retry and discard).
func (n *Node) mountConsole(mux *http.ServeMux) {
	c := console.New(n.broker.JetStream(), n.repo, console.Config{
		Namespace:    n.cfg.Namespace,
		AllowActions: n.cfg.Console.AllowActions,
		Projections:  n.projectionLags,
		Workers:      n.workerStatuses,
		SetPaused:    n.control.SetPaused,
		Archive:      ArchiveStore(n.cfg, n.broker.JetStream(), archive.ReadBucket),
		// A letter the console settles stays, whole, this long.
		SettledMaxAge: n.cfg.Streams.DLQSettledMaxAge.Std(),
		ViewRetention: func(ctx context.Context) (map[string]streams.Retention, error) {
			return n.views.Retention(ctx, n.cfg.Streams.UnservedViewsMaxAge.Std())
		},
	}, n.logger)
	if n.cfg.Console.AllowActions && !n.cfg.HTTP.Auth.Set() {
		n.logger.Warn("console: write actions on (console.allow_actions) without http.auth: whoever reaches the HTTP listener can retry and discard dead letters as the node; set http.auth to give them to operators only",
			"http", n.cfg.HTTP.Listen)
	}
	h := c.Handler()
	mux.Handle(console.Path, h)
	mux.Handle(console.Path+"/", h)
}

// projectionLags reports every read model of the namespace (run by this
// node or another) as `esjet projections ls` does.
func (n *Node) projectionLags(ctx context.Context) ([]console.ProjectionLag, error) {
	if n.views == nil {
		return nil, nil
	}
	all, err := n.views.All(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]console.ProjectionLag, 0, len(all))
	for _, st := range all {
		out = append(out, console.ProjectionLag{Name: st.Name, Behind: st.Lag, LagSeconds: st.LagSeconds,
			Parked: st.Parked, Health: st.Health, Reason: st.Reason})
	}
	return out, nil
}

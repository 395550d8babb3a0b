package node

import (
	"net/http"

	"github.com/esjet/esjet/internal/console"
)

// mountConsole serves the web console at /console on the HTTP listener
// (console.allow_actions turns on its DLQ retry and discard).
func (n *Node) mountConsole(mux *http.ServeMux) {
	c := console.New(n.broker.JetStream(), n.repo, console.Config{
		Namespace:    n.cfg.Namespace,
		AllowActions: n.cfg.Console.AllowActions,
	}, n.logger)
	if n.cfg.Console.AllowActions {
		n.logger.Warn("console: write actions on (console.allow_actions): whoever reaches the HTTP listener can retry and discard dead letters as the node; the NATS roles do not apply to HTTP",
			"http", n.cfg.HTTP.Listen)
	}
	h := c.Handler()
	mux.Handle(console.Path, h)
	mux.Handle(console.Path+"/", h)
}

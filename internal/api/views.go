package api

import (
	"context"
	"fmt"
)

// viewRoute reads a subject under esjet.<ns>.views: views (list the
// projections), views.<name>.get, views.<name>.list.
func viewRoute(toks []string) (route, bool) {
	switch {
	case len(toks) == 1:
		return route{op: opViewsLs, endpoint: endpointViews}, true
	case len(toks) == 3 && toks[2] == "get":
		return route{op: opViewGet, view: toks[1], endpoint: endpointViews}, true
	case len(toks) == 3 && toks[2] == "list":
		return route{op: opViewList, view: toks[1], endpoint: endpointViews}, true
	}
	return route{}, false
}

// serveView answers a view request on NATS.
func (s *Service) serveView(ctx context.Context, r route, body []byte) (any, error) {
	return nil, &Error{Status: 404, Code: "no_route", Message: fmt.Sprintf("views.%s: this node serves no views", r.view)}
}

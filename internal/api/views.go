package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/esjet/esjet/internal/projection"
)

// Views are served on both surfaces (reads) and, for operators, on NATS
// under their ops subject (actions):
//
//	GET /v1/views                                  esjet.<ns>.views            every projection's status
//	GET /v1/views/<name>[?prefix=&limit=&cursor=]  esjet.<ns>.views.<name>.list  {"prefix","limit","cursor"}
//	GET /v1/views/<name>/<key>[?after=P&wait=D]    esjet.<ns>.views.<name>.get   {"key","after","wait"}
//	                                               esjet.<ns>.views.<name>.parked
//	esjet.<ns>.ops.<user>.projections.<action>  {"name","position","generation","reason"}
//	  (pause, resume, rebuild, reset, switch, retry, skip)

// MaxViewWait bounds a read-your-writes wait.
const MaxViewWait = 30 * time.Second

// viewRoute reads a subject under esjet.<ns>.views.
func viewRoute(toks []string) (route, bool) {
	switch {
	case len(toks) == 1:
		return route{op: opViewsLs, endpoint: endpointViews}, true
	case len(toks) == 3 && (toks[2] == "get" || toks[2] == "list" || toks[2] == "parked"):
		return route{op: opViewGet, view: toks[1], action: toks[2], endpoint: endpointViews}, true
	}
	return route{}, false
}

// viewRequest is a NATS view read's body.
type viewRequest struct {
	Key    string `json:"key"`
	After  uint64 `json:"after"`
	Wait   string `json:"wait"`
	Prefix string `json:"prefix"`
	Cursor string `json:"cursor"`
	Limit  int    `json:"limit"`
}

// serveView answers a view read on NATS.
func (s *Service) serveView(ctx context.Context, r route, body []byte) (any, error) {
	if s.views == nil {
		return nil, &Error{Status: 404, Code: CodeNoRoute, Message: "this node serves no views"}
	}
	if r.op == opViewsLs {
		return viewResult(s.views.All(ctx))
	}
	var req viewRequest
	if len(body) > 0 {
		if err := decodeStrict(body, &req); err != nil {
			return nil, &Error{Status: 400, Code: CodeBadRequest, Message: "view request body: " + jsonProblem(err, body)}
		}
	}
	switch r.action {
	case "list":
		return viewResult(s.views.List(ctx, r.view, projection.ListQuery{Prefix: req.Prefix, Cursor: req.Cursor, Limit: req.Limit}))
	case "parked":
		return viewResult(s.views.Parked(ctx, r.view))
	}
	wait, err := parseWait(req.Wait)
	if err != nil {
		return nil, err
	}
	return s.ViewGet(ctx, r.view, req.Key, projection.Wait{After: req.After, For: wait})
}

// ViewGet reads one document (waiting for a position when asked).
func (s *Service) ViewGet(ctx context.Context, name, key string, w projection.Wait) (projection.Doc, error) {
	if s.views == nil {
		return projection.Doc{}, &Error{Status: 404, Code: CodeNoRoute, Message: "this node serves no views"}
	}
	d, err := s.views.Get(ctx, name, key, w)
	return d, viewError(err)
}

func viewResult[T any](v T, err error) (any, error) {
	if err != nil {
		return nil, viewError(err)
	}
	return v, nil
}

// viewError gives a projection error its API status (see [ErrorOf]).
func viewError(err error) error {
	if err == nil {
		return nil
	}
	return ErrorOf(err)
}

func parseWait(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > MaxViewWait {
		return 0, &Error{Status: 400, Code: CodeBadRequest, Message: fmt.Sprintf("wait must be a duration up to %s (e.g. 2s), got %q", MaxViewWait, s)}
	}
	return d, nil
}

// viewsHandler serves /v1/views… ahead of next: the views' paths would
// otherwise collide with /v1/<type>/<id>/events (a key named events).
func (s *Service) viewsHandler(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/views", func(w http.ResponseWriter, r *http.Request) {
		v, err := s.serveView(r.Context(), route{op: opViewsLs}, nil)
		s.reply(w, http.StatusOK, v, err)
	})
	mux.HandleFunc("GET /v1/views/{name}", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		body := viewRequest{Prefix: q.Get("prefix"), Cursor: q.Get("cursor")}
		if l := q.Get("limit"); l != "" {
			n, err := strconv.Atoi(l)
			if err != nil {
				s.reply(w, 0, nil, &Error{Status: 400, Code: CodeBadRequest, Message: "limit must be 1 to 1000 documents, got " + strconv.Quote(l)})
				return
			}
			body.Limit = n
		}
		b, _ := json.Marshal(body)
		v, err := s.serveView(r.Context(), route{op: opViewGet, view: r.PathValue("name"), action: "list"}, b)
		s.reply(w, http.StatusOK, v, err)
	})
	mux.HandleFunc("GET /v1/views/{name}/{key...}", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var after uint64
		if a := q.Get("after"); a != "" {
			p, err := parsePage(a, "", "after", "limit", afterPosition)
			if err != nil {
				s.reply(w, 0, nil, err)
				return
			}
			after = p.After
		}
		wait, err := parseWait(q.Get("wait"))
		if err != nil {
			s.reply(w, 0, nil, err)
			return
		}
		d, err := s.ViewGet(r.Context(), r.PathValue("name"), r.PathValue("key"), projection.Wait{After: after, For: wait})
		s.reply(w, http.StatusOK, d, err)
	})
	views := JSONErrors(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/views" || strings.HasPrefix(r.URL.Path, "/v1/views/") {
			views.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ViewAction is an operator's projection action's body.
type ViewAction struct {
	Name       string `json:"name"`
	Position   uint64 `json:"position,omitempty"`
	Generation int    `json:"generation,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// ViewActionReply says what an action did.
type ViewActionReply struct {
	Action     string              `json:"action"`
	Name       string              `json:"name"`
	Generation int                 `json:"generation,omitempty"`
	Request    *projection.Request `json:"request,omitempty"`
	By         string              `json:"by"`
}

// serveViewAction does an operator's action (esjet projections …): user
// is the ops subject's user token, recorded in skip records.
func (s *Service) serveViewAction(ctx context.Context, user, action string, body []byte) (any, error) {
	if s.views == nil {
		return nil, &Error{Status: 404, Code: CodeNoRoute, Message: "this node serves no views"}
	}
	var a ViewAction
	if err := decodeStrict(body, &a); err != nil {
		return nil, &Error{Status: 400, Code: CodeBadRequest, Message: `projection action body must be {"name": …, "position": …, "generation": …, "reason": …}: ` + jsonProblem(err, body)}
	}
	rep := ViewActionReply{Action: action, Name: a.Name, By: user}
	var err error
	switch action {
	case "pause":
		err = s.views.Pause(ctx, a.Name)
	case "resume":
		err = s.views.Resume(ctx, a.Name)
	case "rebuild":
		rep.Generation, err = s.views.Rebuild(ctx, a.Name)
	case "reset":
		err = s.views.Reset(ctx, a.Name)
	case "switch":
		rep.Generation, err = a.Generation, s.views.Switch(ctx, a.Name, a.Generation)
	case "retry", "skip":
		var req projection.Request
		if action == "retry" {
			req, err = s.views.Retry(ctx, a.Name, a.Position, user)
		} else {
			req, err = s.views.Skip(ctx, a.Name, a.Position, user, a.Reason)
		}
		rep.Request = &req
	default:
		return nil, &Error{Status: 404, Code: CodeNoRoute, Message: fmt.Sprintf("no projection action %q; the actions are pause, resume, rebuild, reset, switch, retry, skip", action)}
	}
	if err != nil {
		return nil, viewError(err)
	}
	s.logger.Info("projection action", "action", action, "projection", a.Name, "by", user, "position", a.Position, "generation", rep.Generation)
	return rep, nil
}

package console

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"html"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/archive"
	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

//go:embed assets
var assets embed.FS

// Path is where the node serves the console.
const Path = "/console"

// Config says what the console may do.
type Config struct {
	// Namespace is the namespace it shows.
	Namespace string
	// AllowActions turns on the write actions (DLQ retry and discard).
	// False (the default) answers them 403 and the page hides them.
	AllowActions bool
	// Projections reports each read model's lag behind the log; nil when
	// the node runs none (the overview says so).
	Projections func(context.Context) ([]ProjectionLag, error)
	// Workers reports each command kind's flow control (paused, backlog,
	// oldest command, rate limit); nil shows none.
	Workers func(context.Context) ([]consumer.KindStatus, error)
	// SetPaused pauses or resumes a kind on every node, recording by and
	// reason (an action: only with AllowActions); nil answers 404.
	SetPaused func(ctx context.Context, kind string, pause bool, by, reason string) (wire.PauseRecord, error)
	// Archive is where an archived aggregate's decisions are (the
	// namespace's archive store): a command lookup (a dead letter's, the
	// timeline's) reads its decision there. Nil: the log only.
	Archive archive.Store
	// SettledMaxAge is how long a dead letter it retries or discards stays
	// in the DLQ, whole (streams.dlq_settled_max_age); zero means the
	// default.
	SettledMaxAge time.Duration
	// ViewRetention says which generation each view bucket holds and how
	// long it is kept (streams.unserved_views_max_age), by stream name; nil
	// shows what the buckets' own configuration says.
	ViewRetention func(context.Context) (map[string]streams.Retention, error)
}

// Console serves the web console of one namespace. It is safe for
// concurrent use.
type Console struct {
	cfg    Config
	js     jetstream.JetStream
	repo   *aggregate.Repository
	names  streams.Names
	insp   *ops.Inspector
	dlq    *ops.DLQ
	logger *slog.Logger
	done   doneCache

	ovMu sync.Mutex // one overview computation at a time
	ov   Overview
	ovAt time.Time
}

// New returns the console of cfg.Namespace, reading through js and repo
// (the node's repository: the aggregate types, their logs and states).
// logger receives the audit lines of write actions; nil discards them. It
// does no I/O.
func New(js jetstream.JetStream, repo *aggregate.Repository, cfg Config, logger *slog.Logger) *Console {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Console{cfg: cfg, js: js, repo: repo, names: streams.NamesFor(cfg.Namespace),
		insp: ops.Inspect(js, cfg.Namespace).WithArchive(cfg.Archive), dlq: ops.OpenDLQ(js, cfg.Namespace).WithSettledMaxAge(cfg.SettledMaxAge),
		logger: logger.With("component", "console")}
}

// ContentSecurityPolicy is what the console's responses may load: its own
// script, stylesheet and JSON, the empty data: favicon, nothing inline,
// never framed. The assets have no inline script or style (keep it so).
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; object-src 'none'; frame-ancestors 'none'"

// Handler serves the page at /console/ (and its assets under
// /console/assets/) and its JSON under /console/api/, with
// [ContentSecurityPolicy]. Mount it on "/console/" and "/console", behind
// the listener's guard (api.Guard: Host, origin, content type, roles).
func (c *Console) Handler() http.Handler {
	mux := c.routes()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", ContentSecurityPolicy)
		mux.ServeHTTP(w, r)
	})
}

// namespaceSlot is the header's namespace element in index.html.
const namespaceSlot = `<span id="namespace" class="ns"></span>`

func (c *Console) routes() *http.ServeMux {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets") // a compile-time embed: cannot fail
	mux.Handle("GET "+Path+"/assets/", http.StripPrefix(Path+"/assets/", http.FileServerFS(static)))
	mux.HandleFunc("GET "+Path, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Path+"/", http.StatusMovedPermanently)
	})
	// The page names the namespace in its header itself, so every view
	// shows it, also one opened by a link (only the overview's poll set
	// it before, and a deep-linked page showed none).
	page, _ := fs.ReadFile(static, "index.html") // embedded: cannot fail
	page = bytes.Replace(page, []byte(namespaceSlot), []byte(strings.Replace(namespaceSlot, "><", ">namespace "+html.EscapeString(c.cfg.Namespace)+"<", 1)), 1)
	mux.HandleFunc("GET "+Path+"/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(page)
	})
	base := Path + "/api"
	mux.HandleFunc("GET "+base+"/overview", c.handleOverview)
	mux.HandleFunc("GET "+base+"/aggregates", c.handleTypes)
	mux.HandleFunc("GET "+base+"/aggregates/{type}", c.handleIDs)
	mux.HandleFunc("GET "+base+"/aggregates/{type}/{id}", c.handleTimeline)
	mux.HandleFunc("GET "+base+"/commands/{id}", c.handleCommand)
	mux.HandleFunc("GET "+base+"/dlq", c.handleDLQList)
	mux.HandleFunc("GET "+base+"/dlq/{seq}", c.handleDLQShow)
	mux.HandleFunc("POST "+base+"/dlq/{seq}/{action}", c.handleDLQAction)
	mux.HandleFunc("POST "+base+"/workers/{kind}/{action}", c.handleWorkersAction)
	mux.HandleFunc(base+"/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &api.Error{Status: http.StatusNotFound, Code: api.CodeNoRoute,
			Message: "no console route for " + r.Method + " " + r.URL.Path})
	})
	return mux
}

func writeError(w http.ResponseWriter, e *api.Error) {
	api.WriteJSON(w, e.Status, map[string]any{"error": e})
}

// reply answers v, or err with its status.
func (c *Console) reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		e := apiError(err)
		if e.Status >= 500 {
			c.logger.Error("console request failed", "error", err)
		}
		writeError(w, e)
		return
	}
	api.WriteJSON(w, http.StatusOK, v)
}

// decode reads a small JSON body, refusing a key given twice (400
// duplicate_key, as the API does) and unknown fields. An empty body is
// the zero value.
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, 64<<10))
	if err != nil {
		return err
	}
	if err := api.CheckDuplicateKeys(body); err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// actor names who asks for a write action in its audit record: the HTTP
// identity the listener authenticated ("http user oncall at 10.0.0.7"), or
// without http.auth only the address ("console at 127.0.0.1").
func actor(r *http.Request) string {
	if id, ok := api.IdentityFrom(r.Context()); ok {
		return "http user " + id.Name + " at " + remoteHost(r)
	}
	return "console at " + remoteHost(r)
}

// remoteHost is the client's address without its port.
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

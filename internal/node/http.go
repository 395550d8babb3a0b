package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// listenHTTP binds http.listen, first thing in [Start]: an address in use
// then fails the node before it starts a server or provisions a stream,
// and leaves no data dir behind. startHTTP serves on it once the node is
// up; until then connections wait in the backlog.
func (n *Node) listenHTTP() error {
	ln, err := net.Listen("tcp", n.cfg.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("http: %w", &config.ListenError{Setting: "http.listen", Addr: n.cfg.HTTP.Listen, Err: err})
	}
	n.httpLn = ln
	return nil
}

// startHTTP serves /healthz, /readyz, the API and the console on the
// listener of [Node.listenHTTP] (HTTPS with http.tls), all behind the
// listener's guard (api.Guard: the Host, origin and content type checks,
// and http.auth).
func (n *Node) startHTTP() error {
	guard, err := guardConfig(n.cfg.HTTP)
	if err != nil {
		return err
	}
	tlsCfg, err := httpTLS(n.cfg.HTTP.TLS)
	if err != nil {
		return err
	}
	ln := n.httpLn
	n.httpAddr = ln.Addr().String()
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", n.handleReady)
	mux.Handle("/v1/", n.api.Handler())
	n.mountConsole(mux)
	if n.metricsOnAPI() {
		mux.Handle("GET /metrics", n.tel.Handler())
	}
	counted := api.Guard(guard, api.JSONErrors(mux))
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.httpInFlight.Add(1)
		defer n.httpInFlight.Add(-1)
		counted.ServeHTTP(w, r)
	})
	n.httpSrv = &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute}
	n.httpDone = make(chan error, 1)
	go func() {
		err := n.httpSrv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		n.httpDone <- err
	}()
	return nil
}

// handleReady answers 200 while NATS is connected, JetStream answers and
// every stream and bucket of the namespace exists (EVENTS, OUTBOX, DLQ, the
// snapshots and receipts buckets); otherwise 503 naming what is missing.
func (n *Node) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	body := map[string]any{"namespace": n.cfg.Namespace, "nats": n.broker.Conn().Status().String()}
	if err := n.ready(ctx); err != nil {
		body["status"] = "unavailable"
		body["error"] = err.Error()
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	body["status"] = "ready"
	if err := n.projectionsNotStarted(); err != nil {
		// Commands are served and views read; the node's own share of
		// the read models waits.
		body["projections"] = "not started yet, trying again: " + err.Error()
	}
	if r := n.refusedReport(); r != nil {
		body["refused"] = r
	}
	if r := n.waitingReport(ctx); r != nil {
		body["waiting_for_newer_worker"] = r
	}
	if r := n.archiveReport(ctx); r != nil {
		body["archive"] = r
	}
	writeJSON(w, http.StatusOK, body)
}

// ready checks JetStream and the namespace's streams and buckets.
func (n *Node) ready(ctx context.Context) error {
	if err := n.componentsErr(); err != nil {
		return err
	}
	js := n.broker.JetStream()
	if _, err := js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("JetStream does not answer: %w", err)
	}
	names := streams.NamesFor(n.cfg.Namespace)
	var missing []string
	for _, s := range []string{names.Events, names.Outbox, names.DLQ, wire.KVStream(names.Snapshots), wire.KVStream(names.Receipts)} {
		_, err := js.Stream(ctx, s)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			missing = append(missing, s)
			continue
		}
		if err != nil {
			return fmt.Errorf("stream %s: %w", s, err)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("namespace %s is missing %s: restart the node to provision it again (esjet streams shows what exists)", n.cfg.Namespace, strings.Join(missing, ", "))
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) { api.WriteJSON(w, code, v) }

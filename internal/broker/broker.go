package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/config"
)

// Broker is a connected NATS client with JetStream, and in embedded mode the
// nats-server it runs. Its methods are safe for concurrent use.
type Broker struct {
	nc        *nats.Conn
	js        jetstream.JetStream
	srv       *server.Server // nil in external mode
	lock      *DirLock       // the data dir's lock; nil in external mode
	clientURL string
	closed    chan struct{} // closed by the connection's ClosedHandler
	logger    *slog.Logger

	closeOnce sync.Once
	closeErr  error

	failMu sync.Mutex
	failed error // why the broker gave its connection up on its own
}

// Done is closed when the connection is closed for good: by [Broker.Close],
// or by the broker itself when it refused a server it reconnected to (see
// [Broker.Err]). A node stops when it is closed.
func (b *Broker) Done() <-chan struct{} { return b.closed }

// Err is why the broker closed its connection on its own — a
// [*ServerTooOldError] after a reconnect to an older server — or nil.
func (b *Broker) Err() error {
	b.failMu.Lock()
	defer b.failMu.Unlock()
	return b.failed
}

func (b *Broker) fail(err error) {
	b.failMu.Lock()
	defer b.failMu.Unlock()
	if b.failed == nil {
		b.failed = err
	}
}

// StartOption adds to what [Start] takes from the config.
type StartOption func(*startOptions)

type startOptions struct {
	views []string
}

// WithViews names the read models the node runs with the built-in store:
// with nats.embedded.users, the node role may write their buckets and the
// operator role read them (see [RoleSpec.Views]).
func WithViews(names ...string) StartOption {
	return func(o *startOptions) { o.views = append(o.views, names...) }
}

// Start starts the broker cfg describes and returns once JetStream answers: an
// embedded nats-server (cfg.NATS.Mode "embedded") or a connection to an external
// cluster. cfg must be valid (see [config.Config.Validate]). A nil logger discards.
// The caller must call [Broker.Close].
func Start(ctx context.Context, cfg config.Config, logger *slog.Logger, opts ...StartOption) (*Broker, error) {
	var so startOptions
	for _, o := range opts {
		o(&so)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	base := logger
	logger = logger.With("component", "broker")
	switch cfg.NATS.Mode {
	case config.ModeEmbedded:
		return startEmbedded(ctx, cfg, so, base, logger)
	case config.ModeExternal:
		return startExternal(ctx, cfg, logger)
	default:
		return nil, fmt.Errorf("start broker: unknown nats.mode %q", cfg.NATS.Mode)
	}
}

// Conn is the broker's connection. Do not close it; call [Broker.Close].
func (b *Broker) Conn() *nats.Conn { return b.nc }

// JetStream is the JetStream context on [Broker.Conn].
func (b *Broker) JetStream() jetstream.JetStream { return b.js }

// ClientURL is where other processes (the esjet CLI, the nats CLI) reach the broker:
// the embedded server's listener with its actual port, or the configured external
// URLs joined by commas, with any password or token in them redacted (it is
// printed and logged; the credentials stay in the config). It is "" for an
// embedded server with listen "none".
func (b *Broker) ClientURL() string { return b.clientURL }

// Embedded reports whether the broker runs nats-server in this process.
func (b *Broker) Embedded() bool { return b.srv != nil }

// Close drains the connection, waits for it to close (or for ctx to end, then closes
// it at once), and in embedded mode shuts the server down, waits for it and gives
// up the data dir's lock. It is
// idempotent: later calls return the first call's result.
func (b *Broker) Close(ctx context.Context) error {
	b.closeOnce.Do(func() { b.closeErr = b.close(ctx) })
	return b.closeErr
}

func (b *Broker) close(ctx context.Context) error {
	var errs []error
	if err := b.nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		errs = append(errs, fmt.Errorf("drain nats connection: %w", err))
		b.nc.Close()
	}
	select {
	case <-b.closed:
	case <-ctx.Done():
		b.nc.Close()
		<-b.closed
		errs = append(errs, fmt.Errorf("drain nats connection: %w", context.Cause(ctx)))
	}
	if b.srv != nil {
		b.srv.Shutdown()
		b.srv.WaitForShutdown()
		b.logger.Info("embedded nats-server stopped")
	}
	if err := b.lock.Release(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Connect connects a client named name to the node cfg describes: in embedded mode to
// its listen address with its auth and TLS (the node must be running: esjet run), in
// external mode to the cluster's URLs with the credentials, auth and TLS configured.
// It does not retry or reconnect; the attempt is bounded by nats.external.connect_timeout
// and ctx. extra options are applied last (a long-running client turns reconnects on).
func Connect(ctx context.Context, cfg config.Config, name string, extra ...nats.Option) (*nats.Conn, error) {
	timeout := cfg.NATS.External.ConnectTimeout.Std()
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = time.Until(dl)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("connect to nats: %w", err)
	}
	opts := []nats.Option{nats.Name(name), nats.Timeout(timeout), nats.NoReconnect()}
	var url, hint string
	switch cfg.NATS.Mode {
	case config.ModeEmbedded:
		e := cfg.NATS.Embedded
		if e.Listen == config.ListenNone {
			return nil, errors.New(`connect to nats: nats.embedded.listen is "none", so the node accepts no outside clients; set a host:port to reach it`)
		}
		host, port, err := net.SplitHostPort(e.Listen)
		if err != nil {
			return nil, fmt.Errorf("connect to nats: nats.embedded.listen %q: %w", e.Listen, err)
		}
		if port == "0" {
			return nil, fmt.Errorf("connect to nats: nats.embedded.listen %q picks a random port at start; set a fixed port to reach the node", e.Listen)
		}
		scheme := "nats"
		if e.TLS.CertFile != "" {
			scheme = "tls"
		}
		url = scheme + "://" + net.JoinHostPort(dialHost(host), port)
		opts = append(opts, clientOptions(e.Auth, e.TLS, "", e.TLS.CertFile != "")...)
		if e.RequireClientCerts {
			opts = append(opts, nats.ClientCert(e.TLS.CertFile, e.TLS.KeyFile))
		}
		hint = " (is `esjet run` running? If it runs with --listen, --config or ESJET_* settings of its own, give this command the same ones)"
	case config.ModeExternal:
		x := cfg.NATS.External
		url = strings.Join(x.URLs, ",")
		opts = append(opts, clientOptions(x.Auth, x.TLS, x.CredentialsFile, false)...)
	default:
		return nil, fmt.Errorf("connect to nats: unknown nats.mode %q", cfg.NATS.Mode)
	}
	if prefix := userInbox(cfg); prefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(prefix))
	}
	nc, err := nats.Connect(url, append(opts, extra...)...)
	if errors.Is(err, nats.ErrAuthorization) {
		// The server answered: it refused the credentials, it is not down.
		hint = " (the server refused the credentials this command presents: check nats.embedded.auth, e.g. ESJET_NATS_EMBEDDED_AUTH_USER and ESJET_NATS_EMBEDDED_AUTH_PASSWORD)"
		if a := cfg.NATS.Embedded.Auth; cfg.NATS.Mode == config.ModeEmbedded && a.User == "" && a.Token == "" {
			hint = " (the server has users and this command presents none: set nats.embedded.auth, e.g. ESJET_NATS_EMBEDDED_AUTH_USER and ESJET_NATS_EMBEDDED_AUTH_PASSWORD)"
		}
		if cfg.NATS.Mode == config.ModeExternal {
			hint = " (the server refused the credentials this command presents: check nats.external.auth or nats.external.credentials_file)"
		}
	}
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w%s", redactURLs(url), err, hint)
	}
	return nc, nil
}

// userInbox is the inbox prefix a CLI connection of cfg uses: the user's
// own ([InboxPrefix]), which is all a role's user may subscribe to; "" (the
// default _INBOX) when the connection names no user: no auth, a token, or
// a creds file whose user JWT cannot be read.
func userInbox(cfg config.Config) string {
	auth, creds := cfg.NATS.Embedded.Auth, ""
	if cfg.NATS.Mode == config.ModeExternal {
		auth, creds = cfg.NATS.External.Auth, cfg.NATS.External.CredentialsFile
	}
	if auth.User != "" {
		return InboxPrefix(auth.User)
	}
	if creds == "" {
		return ""
	}
	data, err := os.ReadFile(creds)
	if err != nil {
		return ""
	}
	tok, err := jwt.ParseDecoratedJWT(data)
	if err != nil {
		return ""
	}
	claims, err := jwt.DecodeUserClaims(tok)
	if err != nil || claims.Name == "" || !validUserToken(claims.Name) {
		return ""
	}
	return InboxPrefix(claims.Name)
}

// dialHost turns a wildcard listen host into one a local client can dial.
func dialHost(host string) string {
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return "127.0.0.1"
	}
	return host
}

// clientOptions are the auth and TLS options of a client. For the embedded server the
// client is local: its cert_file/key_file are the server's, not a client certificate,
// so secure only asks for TLS and ca_file verifies the server.
func clientOptions(auth config.Auth, t config.TLS, creds string, serverTLS bool) []nats.Option {
	var opts []nats.Option
	if creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	if auth.User != "" {
		opts = append(opts, nats.UserInfo(auth.User, auth.Password))
	}
	if auth.Token != "" {
		opts = append(opts, nats.Token(auth.Token))
	}
	if !serverTLS && t.CertFile != "" {
		opts = append(opts, nats.ClientCert(t.CertFile, t.KeyFile))
	}
	if t.CAFile != "" {
		opts = append(opts, nats.RootCAs(t.CAFile))
	}
	if serverTLS && t.CAFile == "" {
		opts = append(opts, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
	return opts
}

// redactURLs drops credentials from a comma-separated URL list.
func redactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		parts[i] = config.RedactURL(p)
	}
	return strings.Join(parts, ",")
}

// waitJetStream polls AccountInfo until JetStream answers: a server reports ready for
// connections before its JetStream (in a cluster, its meta leader) is.
func waitJetStream(ctx context.Context, js jetstream.JetStream, timeout time.Duration) (*jetstream.AccountInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, time.Second)
		info, err := js.AccountInfo(attempt)
		cancelAttempt()
		switch {
		case err == nil:
			return info, nil
		case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("jetstream not ready after %s: %w", timeout, err)
		case <-tick.C:
		}
	}
}

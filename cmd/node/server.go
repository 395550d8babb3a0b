package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/broker"
)

// serverFlags are `esjet server`'s own flags. --listen and --sync shadow
// the global flags of the same name (which configure the node's embedded
// server): here they configure the bare server.
type serverFlags struct {
	name          string
	listen        string
	storeDir      string
	clusterName   string
	clusterListen string
	routes        []string
	sync          string
	maxStore      string
	maxPayload    string
	allowRemote   bool
	debug         bool
	authFile      string
	tlsCert       string
	tlsKey        string
	tlsCA         string

	readiness nats.Option // how the readiness check authenticates (set with --auth)
}

// serverReadyTimeout bounds the wait for the client listener; the wait for
// JetStream in a cluster is bounded only by the context (a member started
// before its peers waits for them).
const serverReadyTimeout = 10 * time.Second

func newServerCmd(g *globals) *cobra.Command {
	f := &serverFlags{}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a bare nats-server with JetStream (no esjet node), alone or as a cluster member",
		Long: `Run the nats-server embedded in esjet as a standalone JetStream server, so a
cluster for nodes in external mode (esjet run --url …) needs no separate
nats-server install. It serves no namespace and reads no esjet config.

Listeners are loopback-only unless the server has authentication and TLS:
--auth names a nats-server config file with the accounts block (or an authorization block) of users
(esjet permissions prints one per role), --tls-cert/--tls-key serve TLS, and
--tls-ca requires client certificates it signed (mTLS; routes too, which a
non-loopback --cluster-listen needs). --allow-remote exposes a listener
without them: only on a trusted network.

For a cluster, run one per member with a unique --name and --store-dir, the
same --cluster-name, its own --cluster-listen and the same --routes (every
member's cluster address; a server ignores the route to itself).

It prints "nats server ready: …" once it accepts clients and, in a cluster,
once JetStream answers (a quorum of members is up), then runs until SIGINT or
SIGTERM and shuts down gracefully. nats-server's log goes to stderr.`,
		Example: `  esjet server --store-dir /var/lib/nats
  esjet server --name n1 --listen 127.0.0.1:4222 --store-dir n1 \
    --cluster-name c1 --cluster-listen 127.0.0.1:6222 \
    --routes nats-route://127.0.0.1:6222,nats-route://127.0.0.1:6223,nats-route://127.0.0.1:6224`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runServer(cmd.Context(), g, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", `server name, unique in a cluster (default "esjet-<client port>")`)
	fl.StringVar(&f.listen, "listen", "127.0.0.1:4222", "client listener host:port (port 0 picks a free port)")
	fl.StringVar(&f.storeDir, "store-dir", "nats-data", "JetStream store directory")
	fl.StringVar(&f.clusterName, "cluster-name", "", "cluster name (required with --cluster-listen)")
	fl.StringVar(&f.clusterListen, "cluster-listen", "", "cluster (route) listener host:port; empty: no cluster")
	fl.StringSliceVar(&f.routes, "routes", nil, "cluster members' route URLs, comma-separated (nats-route://host:port,…)")
	fl.StringVar(&f.sync, "sync", config.SyncAlways, `fsync mode: "always" (every write) or "interval" (every 2 minutes)`)
	fl.StringVar(&f.maxStore, "max-store", "", `JetStream file store limit, e.g. "1GiB" (default: the server's, from the disk's free space)`)
	fl.StringVar(&f.maxPayload, "max-payload", "8MiB", "largest message the server accepts; keep it above the nodes' streams.max_message_size plus headers")
	fl.StringVar(&f.authFile, "auth", "", "nats-server config file with the accounts (or authorization) block of users esjet permissions prints; only they may connect")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate (PEM) of the client listener (and of routes)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "TLS key (PEM) of --tls-cert")
	fl.StringVar(&f.tlsCA, "tls-ca", "", "CA (PEM): clients and cluster peers must present a certificate it signed (mTLS)")
	fl.BoolVar(&f.allowRemote, "allow-remote", false, "allow non-loopback listeners without --auth and TLS (trusted networks only)")
	fl.BoolVar(&f.debug, "debug", false, "log nats-server's debug lines")
	return cmd
}

// serverOptionsFromFlags validates the flags, reporting every problem at
// once, and builds the nats-server options.
func serverOptionsFromFlags(f *serverFlags) (*server.Options, []string, error) {
	var problems []error
	var warnings []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	warn := func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }

	opts := &server.Options{
		JetStream:              true,
		StoreDir:               f.storeDir,
		NoSigs:                 true,
		NoLog:                  true, // logging goes through SetLoggerV2
		DisableJetStreamBanner: true,
	}
	f.readiness = serverSecurity(f, opts, bad)
	serverListenOptions(f, opts, bad, warn)
	serverStoreOptions(f, opts, bad)
	serverClusterOptions(f, opts, bad, warn)
	return opts, warnings, errors.Join(problems...)
}

// serverListenOptions sets the client listener and the server's name from
// it; a listener beyond loopback needs auth and TLS (or --allow-remote).
func serverListenOptions(f *serverFlags, opts *server.Options, bad, warn func(string, ...any)) {
	host, port, err := splitHostPort(f.listen)
	if err != nil {
		bad("--listen %q: %v", f.listen, err)
	} else {
		opts.Host, opts.Port = host, port
		if port == 0 {
			opts.Port = server.RANDOM_PORT // nats-server reads 0 as its default, 4222
		}
		if missing := f.missing(); !loopbackHost(host) && missing != "" {
			if !f.allowRemote {
				bad("--listen %q is not a loopback address and the server has no %s: anyone who reaches it could delete or rewrite every stream; give them (or --allow-remote to expose it anyway on a trusted network)", f.listen, missing)
			} else {
				warn("client listener %s is reachable beyond this host, without %s", f.listen, missing)
			}
		}
	}
	opts.ServerName = f.name
	if opts.ServerName == "" && err == nil && port != 0 {
		opts.ServerName = "esjet-" + strconv.Itoa(port)
	}
	if strings.ContainsAny(opts.ServerName, " \t\n") {
		bad("--name %q: use a name without spaces", opts.ServerName)
	}
}

// serverStoreOptions sets the store: where, how it syncs, how big it and
// a message may be.
func serverStoreOptions(f *serverFlags, opts *server.Options, bad func(string, ...any)) {
	if f.storeDir == "" {
		bad("--store-dir: must not be empty")
	}
	switch f.sync {
	case config.SyncAlways:
		opts.SyncAlways = true
	case config.SyncInterval:
	default:
		bad(`--sync %q: use "always" or "interval"`, f.sync)
	}
	if f.maxStore != "" {
		n, err := config.ParseByteSize(f.maxStore)
		switch {
		case err != nil:
			bad("--max-store: %v", err)
		case n == 0:
			bad("--max-store: must be a positive size")
		default:
			opts.JetStreamMaxStore = int64(n)
		}
	}
	if n, err := config.ParseByteSize(f.maxPayload); err != nil {
		bad("--max-payload: %v", err)
	} else if n < config.KiB || n > 64*config.MiB {
		bad("--max-payload %s: use a size between 1KiB and 64MiB", f.maxPayload)
	} else {
		opts.MaxPayload = int32(n)
	}
}

// serverClusterOptions sets the cluster listener and routes; a cluster
// listener beyond loopback needs TLS with a CA (or --allow-remote).
func serverClusterOptions(f *serverFlags, opts *server.Options, bad, warn func(string, ...any)) {
	if f.clusterListen == "" {
		if f.clusterName != "" || len(f.routes) > 0 {
			bad("--cluster-name and --routes need --cluster-listen")
		}
		return
	}
	if f.clusterName == "" {
		bad("--cluster-listen needs --cluster-name (the same on every member)")
	} else if strings.ContainsAny(f.clusterName, " \t\n") {
		bad("--cluster-name %q: use a name without spaces", f.clusterName)
	}
	if f.name == "" {
		bad("--cluster-listen needs --name, unique in the cluster: JetStream tells members apart by name")
	}
	chost, cport, err := splitHostPort(f.clusterListen)
	if err != nil {
		bad("--cluster-listen %q: %v", f.clusterListen, err)
	} else {
		if cport == 0 {
			bad("--cluster-listen %q: give a fixed port; the other members route to it", f.clusterListen)
		}
		if !loopbackHost(chost) && f.tlsCA == "" {
			if !f.allowRemote {
				bad("--cluster-listen %q is not a loopback address and routes are not authenticated: give --tls-cert, --tls-key and --tls-ca (peers must present a certificate it signed), or --allow-remote to expose it anyway", f.clusterListen)
			} else {
				warn("cluster listener %s is reachable beyond this host, without authentication or TLS", f.clusterListen)
			}
		}
		opts.Cluster = server.ClusterOpts{Name: f.clusterName, Host: chost, Port: cport}
		clusterTLS(f, opts, bad)
	}
	for _, r := range f.routes {
		u, err := url.Parse(strings.TrimSpace(r))
		if err != nil || (u.Scheme != "nats-route" && u.Scheme != "nats") || u.Hostname() == "" || u.Port() == "" {
			bad("--routes %q: use nats-route://host:port", r)
			continue
		}
		opts.Routes = append(opts.Routes, u)
	}
}

func splitHostPort(hostport string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q: use a number from 0 to 65535", portStr)
	}
	return host, port, nil
}

// loopbackHost reports whether host only accepts connections from this
// machine. "" and 0.0.0.0 are every interface.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func runServer(ctx context.Context, g *globals, f *serverFlags) error {
	opts, warnings, err := serverOptionsFromFlags(f)
	if err != nil {
		lines := strings.Split(err.Error(), "\n")
		return fmt.Errorf("invalid server flags (%d problem(s)):\n  %s", len(lines), strings.Join(lines, "\n  "))
	}
	logCfg := config.Default()
	if g.logLevel != "" {
		logCfg.Log.Level = g.logLevel
	}
	if f.debug {
		logCfg.Log.Level = "debug"
	}
	if g.logFormat != "" {
		logCfg.Log.Format = g.logFormat
	}
	logger := newLogger(logCfg, g.stderr)
	for _, w := range warnings {
		logger.Warn(w)
	}

	// Own the store dir before nats-server opens it: two servers on one
	// store lose acknowledged writes.
	lock, err := broker.LockDataDir(f.storeDir, broker.NewHolder("esjet server", f.listen))
	if err != nil {
		return fmt.Errorf("start nats-server: %w", err)
	}
	defer func() { _ = lock.Release() }()

	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("nats-server: %w", err)
	}
	sl := &serverCmdLogger{l: logger.With("component", "nats-server"), fatal: make(chan string, 1)}
	srv.SetLoggerV2(sl, logger.Enabled(ctx, slog.LevelDebug), false, false)
	srv.Start()
	stop := func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
	if err := serverWaitListening(ctx, srv, sl); err != nil {
		stop()
		return serverListenRemedy(fmt.Errorf("start nats-server (listen %s, store dir %s): %w", f.listen, f.storeDir, err), f)
	}
	if err := serverWaitJetStream(ctx, srv, logger, f.readiness); err != nil {
		stop()
		if ctx.Err() != nil {
			return nil // stopped before ready: a clean exit
		}
		return err
	}

	cluster := "none"
	if opts.Cluster.Port != 0 {
		cluster = fmt.Sprintf("%s nats-route://%s", opts.Cluster.Name, net.JoinHostPort(opts.Cluster.Host, strconv.Itoa(opts.Cluster.Port)))
	}
	if err := lock.Update(broker.NewHolder("esjet server", srv.ClientURL())); err != nil {
		logger.Warn("could not record the client URL in the store dir lock", "error", err)
	}
	fmt.Fprintf(g.stdout, "nats server ready: name %s, client %s, cluster %s\n", srv.Name(), srv.ClientURL(), cluster)
	logger.Info("nats server running", "name", srv.Name(), "store_dir", f.storeDir, "sync", f.sync,
		"max_store", opts.JetStreamMaxStore, "routes", len(opts.Routes))

	down := make(chan struct{})
	go func() {
		srv.WaitForShutdown()
		close(down)
	}()
	select {
	case <-ctx.Done():
		logger.Info("shutting down nats server", "name", srv.Name())
		stop()
		return nil
	case <-down:
		return errors.New("nats-server shut down on its own (see its log above)")
	}
}

// serverListenRemedy adds to nats-server's bind error, when the address is
// in use, which flag moves which listener (the bare server reads no esjet
// config and no ESJET_* variable: the flags are the only way).
func serverListenRemedy(err error, f *serverFlags) error {
	if le := (&config.ListenError{Err: err}); !le.InUse() {
		return err
	}
	flag, addr := "--listen", f.listen
	if strings.Contains(err.Error(), "router port") { // nats-server: "Error listening on router port"
		flag, addr = "--cluster-listen", f.clusterListen
	}
	return fmt.Errorf("%w\nanother process already listens on %s (another esjet server or node, or a nats-server?): stop it, or give this server another address with %s HOST:PORT", err, addr, flag)
}

// serverWaitListening waits until the client listener accepts connections,
// giving up at once when nats-server reports a fatal error (port in use,
// store dir unusable), which it logs instead of returning.
func serverWaitListening(ctx context.Context, srv *server.Server, sl *serverCmdLogger) error {
	deadline := time.Now().Add(serverReadyTimeout)
	for !srv.ReadyForConnections(50 * time.Millisecond) {
		select {
		case msg := <-sl.fatal:
			return errors.New(msg)
		case <-ctx.Done():
			return context.Cause(ctx)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not accepting connections after %s", serverReadyTimeout)
		}
	}
	return nil
}

// serverWaitJetStream waits until JetStream answers an in-process client:
// at once alone, and in a cluster once the meta group has a leader and this
// member caught up — which needs a quorum of members up.
func serverWaitJetStream(ctx context.Context, srv *server.Server, logger *slog.Logger, auth nats.Option) error {
	connOpts := []nats.Option{nats.InProcessServer(srv), nats.Name("esjet server readiness")}
	if auth != nil {
		connOpts = append(connOpts, auth)
	}
	nc, err := nats.Connect("", connOpts...)
	if err != nil {
		return fmt.Errorf("connect in-process: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	start := time.Now()
	lastNote := start
	for {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := js.AccountInfo(actx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Since(lastNote) >= 10*time.Second {
			lastNote = time.Now()
			logger.Info("waiting for JetStream (in a cluster: for a quorum of members)", "waited", time.Since(start).Round(time.Second), "error", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// serverCmdLogger routes nats-server's log lines to slog and hands fatal
// ones to the start-up wait.
type serverCmdLogger struct {
	l     *slog.Logger
	fatal chan string
}

func (s *serverCmdLogger) log(level slog.Level, format string, v []any) {
	if s.l.Enabled(context.Background(), level) {
		s.l.Log(context.Background(), level, fmt.Sprintf(format, v...))
	}
}

func (s *serverCmdLogger) Noticef(format string, v ...any) { s.log(slog.LevelInfo, format, v) }
func (s *serverCmdLogger) Warnf(format string, v ...any)   { s.log(slog.LevelWarn, format, v) }
func (s *serverCmdLogger) Errorf(format string, v ...any)  { s.log(slog.LevelError, format, v) }
func (s *serverCmdLogger) Debugf(format string, v ...any)  { s.log(slog.LevelDebug, format, v) }
func (s *serverCmdLogger) Tracef(format string, v ...any)  { s.log(slog.LevelDebug-4, format, v) }

func (s *serverCmdLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	s.l.Error(msg, "fatal", true)
	select {
	case s.fatal <- msg:
	default:
	}
}

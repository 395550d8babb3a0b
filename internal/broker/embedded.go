package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/config"
)

const (
	startTimeout = 10 * time.Second
	// payloadHeadroom leaves room for headers and the protocol above the largest
	// message the streams accept.
	payloadHeadroom = 64 * config.KiB
)

// startEmbedded runs nats-server in-process. base is the caller's logger, from
// which the server's own log lines get component=nats-server.
func startEmbedded(ctx context.Context, cfg config.Config, so startOptions, base, logger *slog.Logger) (*Broker, error) {
	e := cfg.NATS.Embedded
	opts, err := serverOptions(cfg)
	if err != nil {
		return nil, err
	}
	// Own the data dir before nats-server opens its store: a second server on
	// the same store acknowledges writes the first one's state then loses.
	lock, err := LockDataDir(e.DataDir, NewHolder("esjet node", e.Listen))
	if err != nil {
		return nil, fmt.Errorf("start embedded nats-server: %w", err)
	}
	b, err := runEmbedded(ctx, cfg, so, opts, base, logger)
	if err != nil {
		_ = lock.Release()
		return nil, err
	}
	b.lock = lock
	if b.clientURL != "" {
		if err := lock.Update(NewHolder("esjet node", b.clientURL)); err != nil {
			logger.Warn("could not record the listen address in the data dir lock", "error", err)
		}
	}
	return b, nil
}

// runEmbedded starts the server on a data dir the caller has locked and
// connects to it in-process.
func runEmbedded(ctx context.Context, cfg config.Config, so startOptions, opts *server.Options, base, logger *slog.Logger) (*Broker, error) {
	e := cfg.NATS.Embedded
	asNode, err := addUsers(cfg, so.views, opts)
	if err == nil {
		err = addLeafUsers(cfg, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("create embedded nats-server: %w", err)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("create embedded nats-server: %w", err)
	}
	slogger := newServerLogger(base.With("component", "nats-server"))
	srv.SetLoggerV2(slogger, logger.Enabled(ctx, slog.LevelDebug), false, false)
	srv.Start()
	if err := waitReady(ctx, srv, slogger); err != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		if le := (&config.ListenError{Setting: "nats.embedded.listen", Addr: e.Listen, Err: err}); le.InUse() {
			if strings.Contains(err.Error(), "leafnode") {
				le.Setting, le.Addr = "edge.leaf_listen", cfg.Edge.LeafListen
			}
			err = le
		}
		return nil, fmt.Errorf("start embedded nats-server (data dir %s, listen %s): %w", e.DataDir, e.Listen, err)
	}

	b := &Broker{srv: srv, closed: make(chan struct{}), logger: logger}
	if !opts.DontListen {
		b.clientURL = embeddedClientURL(srv, opts)
	}
	connOpts := []nats.Option{
		nats.InProcessServer(srv),
		nats.Name("esjet"),
		nats.ClosedHandler(closedOnce(b.closed)),
		nats.CustomInboxPrefix(NodeInbox(cfg)),
	}
	if asNode != nil {
		connOpts = append(connOpts, asNode) // in-process, as role node
	} else {
		connOpts = append(connOpts, clientOptions(e.Auth, config.TLS{}, "", false)...)
	}
	nc, err := nats.Connect("", connOpts...)
	if err != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("connect in-process to embedded nats-server: %w", err)
	}
	b.nc = nc
	js, err := jetstream.New(nc)
	if err == nil {
		_, err = waitJetStream(ctx, js, startTimeout)
	}
	if err != nil {
		nc.Close()
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("embedded jetstream: %w", err)
	}
	b.js = js
	logger.Info("embedded nats-server started",
		"server_name", e.ServerName, "data_dir", e.DataDir, "client_url", b.clientURL, "sync", e.Sync)
	return b, nil
}

// serverOptions translates the embedded config into nats-server options. Unlike
// nats-server's own defaults, nothing listens unless the config says so.
func serverOptions(cfg config.Config) (*server.Options, error) {
	e := cfg.NATS.Embedded
	opts := &server.Options{
		ServerName:             e.ServerName,
		JetStream:              true,
		StoreDir:               e.DataDir,
		NoSigs:                 true,
		NoLog:                  true, // logging goes through SetLoggerV2 instead
		DisableJetStreamBanner: true,
		SyncAlways:             e.Sync == config.SyncAlways,
		MaxPayload:             int32(max(cfg.Streams.MaxMessageSize+payloadHeadroom, config.MiB)),
		Username:               e.Auth.User,
		Password:               e.Auth.Password,
		Authorization:          e.Auth.Token,
	}
	if e.Sync == config.SyncInterval {
		opts.SyncInterval = e.SyncInterval.Std()
	}
	if e.MaxMemory > 0 {
		opts.JetStreamMaxMemory = int64(e.MaxMemory)
	}
	if e.MaxStore > 0 {
		opts.JetStreamMaxStore = int64(e.MaxStore)
	}
	if e.Listen == config.ListenNone {
		opts.DontListen = true
	} else {
		host, portStr, err := net.SplitHostPort(e.Listen)
		if err != nil {
			return nil, fmt.Errorf("nats.embedded.listen %q: %w", e.Listen, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil {
			return nil, fmt.Errorf("nats.embedded.listen %q: port: %w", e.Listen, err)
		}
		if port == 0 {
			port = server.RANDOM_PORT // nats-server reads 0 as its default, 4222
		}
		if host == "" {
			host = "0.0.0.0" // as net.Listen reads ":port"; nats-server would read "" as its default
		}
		opts.Host, opts.Port = host, port
	}
	if err := leafOptions(cfg, opts); err != nil {
		return nil, err
	}
	if e.TLS.CertFile != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
			CertFile: e.TLS.CertFile,
			KeyFile:  e.TLS.KeyFile,
			CaFile:   e.TLS.CAFile,
			Verify:   e.RequireClientCerts,
		})
		if err != nil {
			return nil, fmt.Errorf("nats.embedded.tls: %w", err)
		}
		opts.TLSConfig, opts.TLSVerify = tc, e.RequireClientCerts
	}
	return opts, nil
}

// waitReady waits until the server accepts connections. It gives up early when the
// server logged a fatal error (port in use, store dir unusable), which otherwise
// only shows as a timeout.
func waitReady(ctx context.Context, srv *server.Server, l *serverLogger) error {
	deadline := time.Now().Add(startTimeout)
	for {
		err := srvReady(srv)
		if err == nil {
			return nil
		}
		select {
		case msg := <-l.fatal:
			return errors.New(msg)
		case <-ctx.Done():
			return context.Cause(ctx)
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
	}
}

func srvReady(srv *server.Server) error {
	// ReadyForConnections sleeps between checks, so a short bound is a poll.
	if srv.ReadyForConnections(50 * time.Millisecond) {
		return nil
	}
	return fmt.Errorf("not ready for connections after %s", startTimeout)
}

func embeddedClientURL(srv *server.Server, opts *server.Options) string {
	scheme := "nats"
	if opts.TLSConfig != nil {
		scheme = "tls"
	}
	port := opts.Port
	if addr, ok := srv.Addr().(*net.TCPAddr); ok {
		port = addr.Port
	}
	return scheme + "://" + net.JoinHostPort(dialHost(opts.Host), strconv.Itoa(port))
}

func closedOnce(ch chan struct{}) nats.ConnHandler {
	var once sync.Once
	return func(*nats.Conn) { once.Do(func() { close(ch) }) }
}

// serverLogger routes nats-server's log lines to slog. Fatal lines are also handed
// to the start-up wait: nats-server logs them instead of returning an error.
type serverLogger struct {
	l     *slog.Logger
	fatal chan string
}

func newServerLogger(l *slog.Logger) *serverLogger {
	return &serverLogger{l: l, fatal: make(chan string, 1)}
}

// levelTrace is below debug: nats-server's protocol tracing.
const levelTrace = slog.LevelDebug - 4

func (s *serverLogger) log(level slog.Level, format string, v []any) {
	if s.l.Enabled(context.Background(), level) {
		s.l.Log(context.Background(), level, fmt.Sprintf(format, v...))
	}
}

func (s *serverLogger) Noticef(format string, v ...any) { s.log(slog.LevelInfo, format, v) }
func (s *serverLogger) Warnf(format string, v ...any)   { s.log(slog.LevelWarn, format, v) }
func (s *serverLogger) Errorf(format string, v ...any)  { s.log(slog.LevelError, format, v) }
func (s *serverLogger) Debugf(format string, v ...any)  { s.log(slog.LevelDebug, format, v) }
func (s *serverLogger) Tracef(format string, v ...any)  { s.log(levelTrace, format, v) }

func (s *serverLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	s.l.Error(msg, "fatal", true)
	select {
	case s.fatal <- msg:
	default:
	}
}

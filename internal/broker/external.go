package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/config"
)

// reconnectWait is the pause between reconnect attempts to the same server; the
// client jitters it and never gives up (MaxReconnects -1).
const reconnectWait = 2 * time.Second

func startExternal(ctx context.Context, cfg config.Config, logger *slog.Logger) (*Broker, error) {
	x := cfg.NATS.External
	url := strings.Join(x.URLs, ",")
	b := &Broker{closed: make(chan struct{}), logger: logger, clientURL: redactURLs(url)}
	opts := append([]nats.Option{
		nats.Name("esjet"),
		nats.CustomInboxPrefix(NodeInboxPrefix(cfg.Namespace)),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.Timeout(x.ConnectTimeout.Std()),
		// Notice a frozen or partitioned server within seconds (the default
		// is two minutes) and move to another member of the cluster.
		nats.PingInterval(2 * time.Second),
		nats.MaxPingsOutstanding(2),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				logger.Warn("nats disconnected", "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			logger.Info("nats reconnected", "url", nc.ConnectedUrlRedacted(), "server_version", nc.ConnectedServerVersion())
			// Another cluster member may run an older release: acting on it
			// would silently lose features (schedules never fire, the relay
			// dies). Give the connection up instead; the node stops.
			if err := checkServerVersion(nc.ConnectedUrlRedacted(), nc.ConnectedServerVersion()); err != nil {
				b.fail(err)
				logger.Error("refusing the nats server reconnected to; closing the connection", "error", err)
				nc.Close()
			}
		}),
		nats.ClosedHandler(closedOnce(b.closed)),
	}, clientOptions(x.Auth, x.TLS, x.CredentialsFile, false)...)

	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redactURLs(url), err)
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redactURLs(url), err)
	}
	b.nc = nc
	if err := checkServerVersion(nc.ConnectedUrlRedacted(), nc.ConnectedServerVersion()); err != nil {
		nc.Close()
		return nil, err
	}
	js, err := jetstream.New(nc)
	var info *jetstream.AccountInfo
	if err == nil {
		info, err = waitJetStream(ctx, js, max(x.ConnectTimeout.Std(), 10*time.Second))
	}
	if err == nil {
		err = checkAPILevel(nc.ConnectedUrlRedacted(), nc.ConnectedServerVersion(), info.API.Level)
		if err != nil {
			nc.Close()
			return nil, err
		}
	}
	if err != nil {
		at := nc.ConnectedUrlRedacted()
		nc.Close()
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return nil, fmt.Errorf("JetStream is not enabled at %s for this account: enable it on the servers (a jetstream block in their config) and for the account: %w", at, err)
		}
		return nil, fmt.Errorf("jetstream at %s: %w", redactURLs(url), err)
	}
	b.js = js
	logger.Info("connected to nats", "url", nc.ConnectedUrlRedacted(), "server_name", nc.ConnectedServerName(),
		"server_version", nc.ConnectedServerVersion(), "jetstream_api_level", info.API.Level)
	return b, nil
}

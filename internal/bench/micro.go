package bench

import (
	"context"
	"fmt"
	"net/url"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/broker"
	"github.com/esjet/esjet/internal/wire"
)

// The micro phase: commands through the node's NATS micro service from a
// TCP client, as a client service would send them, beside raw appends of
// the same message from a TCP client (the append phase's pairing, over
// the wire).

func (e *env) microPhase(ctx context.Context, progress func(float64)) ([]Phase, error) {
	return e.pairedCommands(ctx, PhaseMicro, progress, e.microSend, e.tcpJS, nil)
}

// microSend sends deposit to aggregate a as a NATS request and reads the
// service's error headers; a 409 is a conflict.
func (e *env) microSend(ctx context.Context, a int) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	reply, err := e.tcp.RequestWithContext(ctx, wire.APIPrefix(e.ns)+".acct."+e.ids[a]+".deposit", depositBody)
	if err != nil {
		return err
	}
	if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
		err := fmt.Errorf("micro %s: %s", code, reply.Header.Get(micro.ErrorHeader))
		if code == "409" {
			err = fmt.Errorf("%w: %w", aggregate.ErrConflict, err)
		}
		return err
	}
	return nil
}

// connectTCP opens the TCP client: to the embedded server's random port,
// or to the cluster, with the configured auth and TLS either way.
func (e *env) connectTCP(ctx context.Context) error {
	cfg := e.cfg
	if cfg.NATS.Mode == config.ModeEmbedded {
		u, err := url.Parse(e.node.Broker().ClientURL())
		if err != nil || u.Host == "" {
			return fmt.Errorf("the embedded server has no TCP listener (%q)", e.node.Broker().ClientURL())
		}
		cfg.NATS.Embedded.Listen = u.Host
	}
	nc, err := broker.Connect(ctx, cfg, "esjet-bench")
	if err != nil {
		return err
	}
	e.tcp = nc
	e.tcpJS, err = jetstream.New(nc)
	if err != nil {
		nc.Close()
		return err
	}
	return nil
}

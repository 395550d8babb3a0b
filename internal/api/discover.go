package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// ServingNodes asks, through nc, which esjet nodes serve namespace ns: every
// node runs the micro service ([Service.StartMicro]), which answers PING
// with its namespace in its metadata. It collects the answers for wait (a
// server with no micro service at all answers at once that none listens)
// and returns the identities of those of namespace ns. nc must be in the
// namespace's account (a node or admin user).
//
// Tools that must not run under a live node (esjet restore) ask it first.
func ServingNodes(ctx context.Context, nc *nats.Conn, ns string, wait time.Duration) ([]micro.ServiceIdentity, error) {
	subj, err := micro.ControlSubject(micro.PingVerb, ServiceName, "")
	if err != nil {
		return nil, err
	}
	// The common case, a server without nodes: "no responders" comes back
	// at once rather than after wait.
	rctx, cancel := context.WithTimeout(ctx, wait)
	_, err = nc.RequestWithContext(rctx, subj, nil)
	cancel()
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, nil
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("ping %s: %w", subj, err)
	}
	ch := make(chan *nats.Msg, 64)
	inbox := nc.NewInbox()
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, fmt.Errorf("ping %s: %w", subj, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subj, inbox, nil); err != nil {
		return nil, fmt.Errorf("ping %s: %w", subj, err)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var nodes []micro.ServiceIdentity
	for {
		select {
		case m := <-ch:
			var p micro.Ping
			if json.Unmarshal(m.Data, &p) == nil && p.Name == ServiceName && p.Metadata["namespace"] == ns {
				nodes = append(nodes, p.ServiceIdentity)
			}
		case <-timer.C:
			return nodes, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

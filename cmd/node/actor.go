package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/spf13/cobra"

	"github.com/esjet/esjet/internal/broker"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/wire"
)

// dlqActions asks the node to retry or discard dead letters: the node
// republishes to OUTBOX, clears the receipt and writes the audit record
// (only the node's role may), on esjet.<ns>.ops.<user>.dlq.<action>.
type dlqActions struct {
	nc   *nats.Conn
	ns   string
	user string // the subject's user token
}

// dlqActor names who runs a DLQ action, as the user token of its subject:
// the NATS user the server authenticated this CLI as ("oncall"), which a
// user cannot choose — with roles, the operator may publish only under its
// own token, and the node's audit record says "nats user oncall"; with a
// server that has no users (the loopback default), $USER@host as before
// (dots as '_'), recorded as given.
func dlqActor(ctx context.Context, nc *nats.Conn) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	id, err := broker.WhoAmI(ctx, nc)
	if err != nil || id.User == "" {
		return ops.UserToken(ops.Operator()), nil
	}
	if err := ops.CheckUserToken(id.User); err != nil {
		return "", fmt.Errorf("the NATS user %q cannot name its DLQ actions (esjet.<ns>.ops.<user>.>): %w; use an operator user whose name has no '.', '*', '>' or spaces", id.User, err)
	}
	return id.User, nil
}

// dlqActionsFor is the node's DLQ action endpoint as seen from nc.
func dlqActionsFor(cmd *cobra.Command, nc *nats.Conn, ns string) (*dlqActions, error) {
	user, err := dlqActor(cmd.Context(), nc)
	if err != nil {
		return nil, err
	}
	return &dlqActions{nc: nc, ns: ns, user: user}, nil
}

// do asks the node to run action on req and returns its reply.
func (a *dlqActions) do(ctx context.Context, action string, req ops.ActionRequest) (ops.ActionReply, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return ops.ActionReply{}, err
	}
	subject := wire.ActionSubject(a.ns, a.user, action)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	m, err := a.nc.RequestWithContext(ctx, subject, body)
	if errors.Is(err, nats.ErrNoResponders) {
		return ops.ActionReply{}, fmt.Errorf("dlq %s: no esjet node answers %s at %s: is `esjet run` running with namespace %q (a node of this version: older nodes serve no DLQ actions)?",
			action, subject, a.nc.ConnectedUrlRedacted(), a.ns)
	}
	if err != nil {
		return ops.ActionReply{}, fmt.Errorf("dlq %s: request %s: %w (with roles, the operator user %s may publish only under %s.>)", action, subject, err, a.user, wire.OpsPrefix(a.ns, a.user))
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		return ops.ActionReply{}, apiError(code, m)
	}
	var rep ops.ActionReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return ops.ActionReply{}, fmt.Errorf("dlq %s: the node's reply %.200q: %w", action, m.Data, err)
	}
	return rep, nil
}

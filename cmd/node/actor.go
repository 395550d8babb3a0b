package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/esjet/esjet/internal/broker"
	"github.com/esjet/esjet/internal/ops"
)

// dlqActor names who runs a DLQ action, for its audit record: the NATS user
// the server authenticated this CLI as ("nats user oncall"), which a user
// cannot choose; with a server that has no users (the loopback default),
// $USER@host as before.
func (g *globals) dlqActor(cmd *cobra.Command) string {
	cfg, err := g.load(cmd.Flags())
	if err != nil {
		return ops.Operator()
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
	defer cancel()
	nc, err := broker.Connect(ctx, cfg, "esjet dlq (who am I)")
	if err != nil {
		return ops.Operator()
	}
	defer nc.Close()
	id, err := broker.WhoAmI(ctx, nc)
	if err != nil || id.User == "" {
		return ops.Operator()
	}
	return "nats user " + id.User
}

package esjet

import (
	"context"
	"fmt"

	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/api"
)

// MultiCommand is one command of [Node.SendAll].
type MultiCommand struct {
	Type, ID, Kind string
	// Payload is marshalled as JSON, as [Node.Send] does.
	Payload any
	// ExpectedVersion, when set, is the version the aggregate must be at;
	// otherwise the command is decided on the aggregate's current state.
	ExpectedVersion *uint64
}

// StaleError is [Node.SendAll]'s answer when an aggregate was not at its
// expected version: it names the aggregate. It wraps [ErrConflict].
type StaleError = aggregate.StaleError

// SendAll decides each command against its own aggregate and appends all
// the decisions atomically — all of them or none — for the invariants a
// saga is too weak for (moving money between two accounts). It costs one
// JetStream atomic batch (on one server ~2–3 ms whatever the number of
// aggregates) and holds every aggregate's lock for the whole call, so keep
// it for the cases that need it. A rejection by any Decide, or a
// [*StaleError], appends nothing. [WithIdempotencyKey] applies to every
// command (each aggregate derives its own decision id from it).
func (n *Node) SendAll(ctx context.Context, cmds []MultiCommand, opts ...SendOption) ([]Result, error) {
	var m api.Meta
	for _, o := range opts {
		o(&m)
	}
	mc := make([]aggregate.MultiRequest, len(cmds))
	for i, c := range cmds {
		body, err := payloadBytes(c.Payload)
		if err != nil {
			return nil, fmt.Errorf("esjet: marshal command %d (%s) payload: %w", i, c.Kind, err)
		}
		mc[i] = aggregate.MultiRequest{ExpectedVersion: c.ExpectedVersion, Request: aggregate.Request{
			Type: c.Type, ID: c.ID, Kind: c.Kind, Payload: body, IdempotencyKey: m.IdempotencyKey, CorrelationID: m.CorrelationID,
		}}
	}
	return n.n.Repository().HandleAll(ctx, mc)
}

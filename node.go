package esjet

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/node"
)

// Config is a node's configuration; see config/esjet.yaml for every field.
type Config = config.Config

// DefaultConfig returns the defaults: an embedded nats-server on
// 127.0.0.1:4222 with sync always, namespace "demo", data in ./data.
func DefaultConfig() Config { return config.Default() }

// LoadConfig reads a config file ("" = $ESJET_CONFIG or config/esjet.yaml
// when present) with ESJET_* overrides from environ, and validates it.
func LoadConfig(path string, environ []string) (Config, error) { return config.Load(path, environ) }

// Options start a [Node].
type Options struct {
	Config     Config
	Aggregates []*Definition
	// Handlers carry out command kinds in Go, by kind: esjet runs a worker
	// pool for each (sizes and retries from the config's workers section).
	Handlers map[string]Handler
	// Projections are the read models this node runs (see [Projection]).
	Projections []Projection
	// Logger receives the node's logs; nil discards them.
	Logger *slog.Logger
}

// Delivery is one attempt at one command, as a Go handler gets it: the
// command id (its idempotency key), kind, payload, attempt number and the
// issuing aggregate and version.
type Delivery = consumer.Delivery

// Handler carries out one command kind. Return the result (JSON, may be
// nil) or an error: Retry(err, after) asks for another attempt, Terminal(err)
// dead-letters it and reports <kind>_failed; any other error is retried.
type Handler = consumer.Handler

// HandlerFunc adapts a function to Handler.
type HandlerFunc = consumer.HandlerFunc

// Retry marks a handler error retryable, after a delay (0: the backoff).
func Retry(err error, after time.Duration) error { return consumer.Retry(err, after) }

// Terminal marks a handler error terminal: no retry, a dead letter.
func Terminal(err error) error { return consumer.Terminal(err) }

// Result is what handling a command did: the aggregate's new version, the
// recorded events and the commands issued.
type Result = aggregate.Result

// History is an aggregate's stored events and the commands it issued.
type History = api.History

// Errors a command can end with; match them with errors.Is.
var (
	ErrRejected       = aggregate.ErrRejected       // the domain said no (a *Rejection)
	ErrUnknownType    = aggregate.ErrUnknownType    // no such aggregate type
	ErrUnknownCommand = aggregate.ErrUnknownCommand // no such command on the type
	ErrBadCommand     = aggregate.ErrBadCommand     // the payload does not decode strictly
	ErrNotFound       = aggregate.ErrNotFound       // the aggregate has no events
	ErrConflict       = aggregate.ErrConflict       // too many concurrent changes; retry
	ErrKeyReused      = aggregate.ErrKeyReused      // idempotency key reused with another request
	// ErrOutcomeNotSendable: <kind>_done and <kind>_failed are reported by
	// the worker that ran the command, never sent.
	ErrOutcomeNotSendable = aggregate.ErrOutcomeNotSendable
)

// Node is a running esjet node: the event log, the registered aggregate
// types, the NATS micro and HTTP APIs.
type Node struct{ n *node.Node }

// Start validates opts.Config, starts the node and returns once it is ready.
// Close it when done.
func Start(ctx context.Context, opts Options) (*Node, error) {
	if err := opts.Config.Validate(); err != nil {
		return nil, fmt.Errorf("esjet: invalid configuration: %w", err)
	}
	n, err := node.Start(ctx, opts.Config, node.Options{Logger: opts.Logger, Aggregates: opts.Aggregates, Version: Version, Handlers: opts.Handlers, Projections: opts.Projections})
	if err != nil {
		return nil, err
	}
	return &Node{n: n}, nil
}

// Version is the esjet library version reported by the micro service.
const Version = "0.1.0"

// SendOption varies one Send.
type SendOption func(*api.Meta)

// WithIdempotencyKey makes the command safe to retry: the same key with the
// same command and payload returns the first result and appends nothing.
func WithIdempotencyKey(key string) SendOption { return func(m *api.Meta) { m.IdempotencyKey = key } }

// WithCorrelationID sets the correlation id recorded with the decision.
func WithCorrelationID(id string) SendOption { return func(m *api.Meta) { m.CorrelationID = id } }

// Send handles a command on aggregate typ/id. payload is marshalled as JSON
// (json.RawMessage and []byte are sent as they are; nil means {}). An
// outcome kind (<kind>_done, <kind>_failed) is refused with
// [ErrOutcomeNotSendable]: only the worker that ran the command reports it.
func (n *Node) Send(ctx context.Context, typ, id, kind string, payload any, opts ...SendOption) (Result, error) {
	body, err := payloadBytes(payload)
	if err != nil {
		return Result{}, fmt.Errorf("esjet: marshal %s payload: %w", kind, err)
	}
	var m api.Meta
	for _, o := range opts {
		o(&m)
	}
	return n.n.API().Send(ctx, typ, id, kind, body, m)
}

// payloadBytes is a command's payload as [Node.Send] and [Node.SendAll]
// take it: json.RawMessage and []byte as they are, nil as nothing, anything
// else marshalled as JSON.
func payloadBytes(payload any) ([]byte, error) {
	switch p := payload.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return p, nil
	case []byte:
		return p, nil
	default:
		return json.Marshal(p)
	}
}

// State returns the aggregate's current state as the registered type's
// state value (type-assert it), with its version.
func (n *Node) State(ctx context.Context, typ, id string) (state any, version uint64, err error) {
	st, err := n.n.Repository().Get(ctx, typ, id)
	if err != nil {
		return nil, 0, err
	}
	return st.Value, st.Position.Version, nil
}

// Events returns the aggregate's history.
func (n *Node) Events(ctx context.Context, typ, id string) (History, error) {
	return n.n.API().Events(ctx, typ, id, 0, false)
}

// Namespace is the namespace the node serves.
func (n *Node) Namespace() string { return n.n.Config().Namespace }

// NATSURL is where NATS clients reach the node ("" when it listens nowhere).
func (n *Node) NATSURL() string { return n.n.Broker().ClientURL() }

// HTTPAddr is the HTTP API's address ("" when disabled).
func (n *Node) HTTPAddr() string { return n.n.HTTPAddr() }

// Close drains and stops the node. It is idempotent.
func (n *Node) Close(ctx context.Context) error { return n.n.Close(ctx) }

// Package api is esjet's command and event-store API, served on two
// surfaces with the same operations, routes and error codes: a NATS micro
// service (`nats micro ls` lists it) and an HTTP gateway (JSON).
//
//	operation        NATS subject                          HTTP
//	send a command   esjet.<ns>.<type>.<id>.<command>       POST /v1/<type>/<id>/<command>
//	current state    esjet.<ns>.<type>.<id>.state           GET  /v1/<type>/<id>
//	history          esjet.<ns>.<type>.<id>.events          GET  /v1/<type>/<id>/events
//	raw append       esjet.<ns>.raw.append.<type>.<id>      POST /v1/raw/<type>/<id>/events
//	raw load         esjet.<ns>.raw.events.<type>.<id>      GET  /v1/raw/<type>/<id>/events
//	list types       esjet.<ns>.types                       GET  /v1/types
//
// A command's body is its JSON payload; the Idempotency-Key header makes a
// retry safe. Errors carry a status (400 bad input, 404 unknown type or
// aggregate, 409 conflict or reused key, 413 too large, 422 domain
// rejection, 500 infrastructure), a machine-readable code and a message.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/streams"
)

// Service implements the operations both surfaces serve.
type Service struct {
	repo    *aggregate.Repository
	ns      string
	maxBody int
	logger  *slog.Logger
}

// New returns the API over repo for namespace ns. maxBody caps a request
// body in bytes (the streams' max message size is a good value).
func New(repo *aggregate.Repository, ns string, maxBody int, logger *slog.Logger) *Service {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Service{repo: repo, ns: ns, maxBody: maxBody, logger: logger.With("component", "api")}
}

// Meta is what a request carries besides its body.
type Meta struct {
	IdempotencyKey string
	CorrelationID  string
	CausationID    string
	TraceParent    string
}

// Header names read from NATS and HTTP requests.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderCorrelationID  = "Esjet-Correlation-Id"
	HeaderCausationID    = "Esjet-Causation-Id"
	HeaderTraceParent    = "traceparent"
)

// Send handles one command.
func (s *Service) Send(ctx context.Context, typ, id, kind string, body []byte, m Meta) (aggregate.Result, error) {
	if len(body) > s.maxBody {
		return aggregate.Result{}, tooLarge(len(body), s.maxBody)
	}
	if err := checkKey(m.IdempotencyKey); err != nil {
		return aggregate.Result{}, err
	}
	return s.repo.Handle(ctx, aggregate.Command{
		Type: typ, ID: id, Kind: kind, Payload: body, IdempotencyKey: m.IdempotencyKey,
		CorrelationID: m.CorrelationID, CausationID: m.CausationID, TraceParent: m.TraceParent,
	})
}

// State returns an aggregate's current state.
func (s *Service) State(ctx context.Context, typ, id string) (aggregate.State, error) {
	return s.repo.Get(ctx, typ, id)
}

// History is an aggregate's stored events and the commands its decisions
// issued, in order.
type History struct {
	AggregateType string           `json:"aggregate_type"`
	AggregateID   string           `json:"aggregate_id"`
	Version       uint64           `json:"version"`
	Seq           uint64           `json:"seq"`
	Events        []HistoryEvent   `json:"events"`
	Commands      []HistoryCommand `json:"commands"`
}

// HistoryEvent is one stored event.
type HistoryEvent struct {
	ID         string    `json:"id"`
	Type       string    `json:"type"`
	Schema     int       `json:"schema"`
	Version    uint64    `json:"version"`
	Time       time.Time `json:"time"`
	Seq        uint64    `json:"seq"`
	DecisionID string    `json:"decision_id"`
	Data       any       `json:"data,omitempty"`
}

// HistoryCommand is one recorded command.
type HistoryCommand struct {
	ID           string     `json:"id"`
	Kind         string     `json:"kind"`
	Seq          uint64     `json:"seq"`
	Report       bool       `json:"report,omitempty"`
	DeliverAfter *time.Time `json:"deliver_after,omitempty"`
	Payload      any        `json:"payload,omitempty"`
}

// Events returns the aggregate's history after version after (0: all). It
// works for any type token, registered or raw. requireType demands a
// registered type (the typed routes).
func (s *Service) Events(ctx context.Context, typ, id string, after uint64, requireType bool) (History, error) {
	if requireType {
		if _, err := s.repo.Registry().Get(typ); err != nil {
			return History{}, err
		}
	}
	recs, err := s.repo.Log().Load(ctx, typ, id, streams.Position{})
	if err != nil {
		return History{}, err
	}
	if len(recs) == 0 {
		return History{}, fmt.Errorf("%w: %s/%s has no events", aggregate.ErrNotFound, typ, id)
	}
	h := History{AggregateType: typ, AggregateID: id, Events: []HistoryEvent{}, Commands: []HistoryCommand{}}
	for _, r := range recs {
		h.Version, h.Seq = r.LastVersion(), r.Seq
		if r.LastVersion() <= after {
			continue
		}
		for _, e := range r.Events {
			if e.Version <= after {
				continue
			}
			h.Events = append(h.Events, HistoryEvent{ID: e.ID, Type: e.Type, Schema: e.Schema, Version: e.Version,
				Time: e.Time, Seq: r.Seq, DecisionID: r.ID, Data: rawJSON(e.Data)})
		}
		for _, c := range r.Commands {
			hc := HistoryCommand{ID: c.ID, Kind: c.Kind, Seq: r.Seq, Report: c.Report, Payload: rawJSON(c.Payload)}
			if !c.DeliverAfter.IsZero() {
				t := c.DeliverAfter
				hc.DeliverAfter = &t
			}
			h.Commands = append(h.Commands, hc)
		}
	}
	return h, nil
}

// AppendRaw appends events from a service without a Decide in esjet.
func (s *Service) AppendRaw(ctx context.Context, typ, id string, body []byte, m Meta) (aggregate.Result, error) {
	if len(body) > s.maxBody {
		return aggregate.Result{}, tooLarge(len(body), s.maxBody)
	}
	var req aggregate.RawAppend
	if err := decodeStrict(body, &req); err != nil {
		return aggregate.Result{}, &Error{Status: 400, Code: "bad_request", Message: "raw append body: " + err.Error()}
	}
	req.Type, req.ID = typ, id
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = m.IdempotencyKey
	}
	if err := checkKey(req.IdempotencyKey); err != nil {
		return aggregate.Result{}, err
	}
	if req.CorrelationID == "" {
		req.CorrelationID = m.CorrelationID
	}
	if req.TraceParent == "" {
		req.TraceParent = m.TraceParent
	}
	return s.repo.AppendRaw(ctx, req)
}

// TypeInfo describes a registered aggregate type.
type TypeInfo struct {
	Type     string   `json:"type"`
	Commands []string `json:"commands"`
}

// Types lists the registered aggregate types and their commands.
func (s *Service) Types() []TypeInfo {
	reg := s.repo.Registry()
	out := []TypeInfo{}
	for _, t := range reg.Types() {
		def, _ := reg.Get(t)
		out = append(out, TypeInfo{Type: t, Commands: def.Commands()})
	}
	return out
}

// Error is an API error as both surfaces report it.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Version is the aggregate's actual version on a version conflict.
	Version *uint64 `json:"version,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// MaxKeyLen caps an idempotency key.
const MaxKeyLen = 256

func checkKey(key string) error {
	if len(key) > MaxKeyLen {
		return &Error{Status: 400, Code: "invalid_idempotency_key", Message: fmt.Sprintf("Idempotency-Key is %d characters, longer than %d", len(key), MaxKeyLen)}
	}
	return nil
}

// tooLarge reports a body over the limit; n < 0 when its length is unknown
// (a chunked HTTP body).
func tooLarge(n, max int) error {
	msg := fmt.Sprintf("request body is %d bytes, over the %d-byte limit (streams.max_message_size)", n, max)
	if n < 0 {
		msg = fmt.Sprintf("request body is over the %d-byte limit (streams.max_message_size)", max)
	}
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: msg}
}

// Status is the status an operation's error is answered with (200 for nil).
func Status(err error) int {
	if err == nil {
		return 200
	}
	return toError(err).Status
}

// toError maps any error from the operations to an [*Error].
func toError(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	var rej *aggregate.Rejection
	var vc *aggregate.VersionConflictError
	var te *streams.TokenError
	switch {
	case errors.Is(err, aggregate.ErrInvalidDecision):
		// The aggregate broke the contract: a bug on the server side, even
		// when the cause underneath is a token or JSON error.
		return &Error{Status: 500, Code: "internal", Message: err.Error()}
	case errors.As(err, &rej):
		return &Error{Status: 422, Code: rej.Code, Message: rej.Message}
	case errors.As(err, &vc):
		v := vc.Actual
		return &Error{Status: 409, Code: "version_conflict", Message: err.Error(), Version: &v}
	case errors.As(err, &te):
		return &Error{Status: 400, Code: "invalid_token", Message: err.Error()}
	case errors.Is(err, aggregate.ErrUnknownType):
		return &Error{Status: 404, Code: "unknown_type", Message: err.Error()}
	case errors.Is(err, aggregate.ErrNotFound):
		return &Error{Status: 404, Code: "not_found", Message: err.Error()}
	case errors.Is(err, aggregate.ErrUnknownCommand):
		return &Error{Status: 400, Code: "unknown_command", Message: err.Error()}
	case errors.Is(err, aggregate.ErrBadCommand):
		return &Error{Status: 400, Code: "bad_payload", Message: err.Error()}
	case errors.Is(err, aggregate.ErrManagedType):
		return &Error{Status: 400, Code: "managed_type", Message: err.Error()}
	case errors.Is(err, streams.ErrInvalidDecision):
		return &Error{Status: 400, Code: "invalid_events", Message: err.Error()}
	case errors.Is(err, aggregate.ErrKeyReused):
		return &Error{Status: 409, Code: "idempotency_key_reused", Message: err.Error()}
	case errors.Is(err, aggregate.ErrConflict):
		return &Error{Status: 409, Code: "conflict", Message: err.Error()}
	case errors.Is(err, aggregate.ErrTooLarge), errors.Is(err, streams.ErrTooLarge):
		return &Error{Status: 413, Code: "too_large", Message: err.Error()}
	case errors.Is(err, streams.ErrStorageFull):
		return &Error{Status: http.StatusInsufficientStorage, Code: "storage_full", Message: err.Error() +
			" — nothing was written; free space or raise the JetStream storage limits (nats.embedded.max_store), then retry"}
	case errors.Is(err, streams.ErrUnknownOutcome):
		return &Error{Status: 503, Code: "outcome_unknown", Message: err.Error() +
			" — the command may have been recorded: retry with the same Idempotency-Key, or read the aggregate's events before sending it again without one"}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: 503, Code: "unavailable", Message: err.Error() +
			" — the node did not finish in time; retry with the same Idempotency-Key (without one, read the aggregate's events first)"}
	default:
		return &Error{Status: 500, Code: "internal", Message: err.Error()}
	}
}

package api

import (
	"context"
	"fmt"
	"log/slog"
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

// Config are the API's tunables.
type Config struct {
	// Namespace is the bounded context served (subjects esjet.<ns>.…).
	Namespace string
	// MaxBody caps a request body in bytes; the streams' max message size
	// is a good value. Zero means 1 MiB.
	MaxBody int
}

// New returns the API over repo. It refuses a registry whose aggregate
// types or command kinds collide with the API's routes ([ErrRouteWord]).
func New(repo *aggregate.Repository, cfg Config, logger *slog.Logger) (*Service, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 1 << 20
	}
	if err := checkRouteWords(repo.Registry()); err != nil {
		return nil, err
	}
	return &Service{repo: repo, ns: cfg.Namespace, maxBody: cfg.MaxBody, logger: logger.With("component", "api")}, nil
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

// Types lists the registered aggregate types and the commands clients may
// send (outcomes, which only workers report, are not among them).
func (s *Service) Types() []TypeInfo {
	reg := s.repo.Registry()
	out := []TypeInfo{}
	for _, t := range reg.Types() {
		def, _ := reg.Get(t)
		out = append(out, TypeInfo{Type: t, Commands: def.Commands()})
	}
	return out
}

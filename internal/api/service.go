package api

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/projection"
	"github.com/esjet/esjet/internal/telemetry"
	"github.com/esjet/esjet/internal/wire"
)

// Service implements the operations both surfaces serve.
type Service struct {
	repo     *aggregate.Repository
	ns       string
	maxBody  int
	maxDepth int
	logger   *slog.Logger
	ops      OpsHandler
	tel      *telemetry.Telemetry
	known    map[string]map[string]bool // type → command kinds: the metric labels it may use
	views    *projection.Views
	guarded  []string // cfg.GuardedReplies
	// storeReplies: see [storeReplies].
	storeReplies []string
}

// OpsHandler serves an operator's request on esjet.<ns>.ops.<user>.dlq.<action>
// (the node's DLQ actions; action is the last token) and
// esjet.<ns>.ops.<user>.workers.<action> (action "workers.<action>"): user
// is the subject's user token. Its error is answered like any other (an
// [*Error] keeps its status).
type OpsHandler func(ctx context.Context, user, action string, body []byte) (any, error)

// Config are the API's tunables.
type Config struct {
	// Namespace is the bounded context served (subjects esjet.<ns>.…).
	Namespace string
	// MaxBody caps a request body in bytes; the streams' max message size
	// is a good value. Zero means 1 MiB.
	MaxBody int
	// MaxDepth caps the JSON nesting of a command payload or raw append
	// body; deeper is answered 400 too_deep. Zero means [DefaultMaxDepth].
	MaxDepth int
	// Ops serves esjet.<ns>.ops.<user>.dlq.<action> on NATS (not HTTP);
	// nil answers those subjects 404.
	Ops OpsHandler
	// Telemetry counts commands and traces them; nil does neither.
	Telemetry *telemetry.Telemetry
	// Views serves the read models' queries and the operators' projection
	// actions; nil answers them 404.
	Views *projection.Views
	// GuardedReplies are further subjects (wildcards allowed) the node never
	// answers on, beside its streams, buckets and APIs ([storeReplies]):
	// what its workers request (their targets). A request with such a reply
	// subject is dropped. (Not the node's own inbox: its own requests to the
	// API come back there, and a stray answer to it is ignored.)
	GuardedReplies []string
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
	if cfg.MaxDepth <= 0 {
		cfg.MaxDepth = DefaultMaxDepth
	}
	if err := checkRouteWords(repo.Registry()); err != nil {
		return nil, err
	}
	return &Service{guarded: cfg.GuardedReplies, storeReplies: storeReplies(cfg.Namespace), repo: repo, ns: cfg.Namespace, maxBody: cfg.MaxBody, maxDepth: cfg.MaxDepth, logger: logger.With("component", "api"), ops: cfg.Ops,
		tel: cfg.Telemetry, views: cfg.Views, known: knownKinds(repo.Registry())}, nil
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
	HeaderIdempotencyKey = wire.HeaderIdempotencyKey
	HeaderCorrelationID  = wire.HeaderCorrelationID
	HeaderCausationID    = wire.HeaderCausationID
	HeaderTraceParent    = wire.HeaderTraceParent
)

// Send handles one command.
func (s *Service) Send(ctx context.Context, typ, id, kind string, body []byte, m Meta) (res aggregate.Result, err error) {
	lt, lk := s.labels(typ, kind)
	ctx, tp, done := s.startCommand(ctx, lt, lk, m.TraceParent)
	defer func() { done(res, err) }()
	if len(body) > s.maxBody {
		return aggregate.Result{}, tooLarge(len(body), s.maxBody)
	}
	if err := checkKey(m.IdempotencyKey); err != nil {
		return aggregate.Result{}, err
	}
	if err := checkMeta(m); err != nil {
		return aggregate.Result{}, err
	}
	if err := checkBody(body, s.maxDepth); err != nil {
		return aggregate.Result{}, err
	}
	return s.repo.Handle(ctx, aggregate.Request{
		Type: typ, ID: id, Kind: kind, Payload: body, IdempotencyKey: m.IdempotencyKey,
		CorrelationID: m.CorrelationID, CausationID: m.CausationID, TraceParent: tp,
	})
}

// State returns an aggregate's current state.
func (s *Service) State(ctx context.Context, typ, id string) (aggregate.State, error) {
	return s.repo.Get(ctx, typ, id)
}

// AppendRaw appends events from a service without a Decide in esjet.
func (s *Service) AppendRaw(ctx context.Context, typ, id string, body []byte, m Meta) (res aggregate.Result, err error) {
	done := s.countRaw(time.Now())
	defer func() { done(res, err) }()
	if slices.Contains(RouteWords, typ) {
		return aggregate.Result{}, &Error{Status: 400, Code: CodeRouteWord, Message: fmt.Sprintf(
			"%q is one of the API's route words (%s), never an aggregate type: its events could not be read back; name the type otherwise",
			typ, strings.Join(RouteWords, ", "))}
	}
	if len(body) > s.maxBody {
		return aggregate.Result{}, tooLarge(len(body), s.maxBody)
	}
	if err := checkBody(body, s.maxDepth); err != nil {
		return aggregate.Result{}, err
	}
	var req aggregate.RawAppend
	if err := decodeStrict(body, &req); err != nil {
		return aggregate.Result{}, &Error{Status: 400, Code: CodeBadRequest, Message: "raw append body: " + jsonProblem(err, body)}
	}
	req.Type, req.ID = typ, id
	// Each checked under the name its caller gave it, body field or header.
	if err := checkMetaAs(Meta{CorrelationID: req.CorrelationID, CausationID: req.CausationID, TraceParent: req.TraceParent}, bodyNames); err != nil {
		return aggregate.Result{}, err
	}
	if err := checkMeta(m); err != nil {
		return aggregate.Result{}, err
	}
	if err := checkKeyAs(req.IdempotencyKey, "idempotency_key"); err != nil {
		return aggregate.Result{}, err
	}
	if err := checkKey(m.IdempotencyKey); err != nil {
		return aggregate.Result{}, err
	}
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = m.IdempotencyKey
	}
	if req.CorrelationID == "" {
		req.CorrelationID = m.CorrelationID
	}
	if req.CausationID == "" {
		req.CausationID = m.CausationID
	}
	if req.TraceParent == "" {
		req.TraceParent = m.TraceParent
	}
	ctx, req.TraceParent, done = s.startCommand(ctx, rawLabel, rawLabel, req.TraceParent)
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

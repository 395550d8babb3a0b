package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/esjet/esjet/internal/aggregate"
)

// The multi-aggregate append: POST /v1/multi and esjet.<ns>.multi take
// several commands, one per aggregate, and append all their decisions or
// none (aggregate.Repository.HandleAll).

// opMulti and endpointMulti route the NATS subject esjet.<ns>.multi.
const (
	opMulti       = "multi"
	endpointMulti = "multi"
)

// MultiRequest is the body of a multi-aggregate request.
type MultiRequest struct {
	Commands []MultiCommand `json:"commands"`
	// IdempotencyKey applies to every command that has none of its own
	// (each aggregate derives its own decision id from it). The request's
	// Idempotency-Key header counts as this field.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// MultiCommand is one command of a [MultiRequest].
type MultiCommand struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Command string          `json:"command"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// ExpectedVersion, when set, is the version the aggregate must be at;
	// otherwise the command is decided on its current state.
	ExpectedVersion *uint64 `json:"expected_version,omitempty"`
	IdempotencyKey  string  `json:"idempotency_key,omitempty"`
}

// MultiResult is the answer: one result per command, in request order.
type MultiResult struct {
	Results []aggregate.Result `json:"results"`
}

// Multi handles a multi-aggregate request.
func (s *Service) Multi(ctx context.Context, body []byte, m Meta) (_ MultiResult, err error) {
	ctx, tp, done := s.startCommand(ctx, multiLabel, multiLabel, m.TraceParent)
	defer func() { done(aggregate.Result{}, err) }()
	if len(body) > s.maxBody {
		return MultiResult{}, tooLarge(len(body), s.maxBody)
	}
	if err := checkBody(body, s.maxDepth); err != nil {
		return MultiResult{}, err
	}
	if err := checkMeta(m); err != nil {
		return MultiResult{}, err
	}
	var req MultiRequest
	if err := decodeStrict(body, &req); err != nil {
		return MultiResult{}, &Error{Status: 400, Code: CodeBadRequest, Message: `multi body: ` + jsonProblem(err, body) +
			`; send {"commands":[{"type":…,"id":…,"command":…,"payload":{…}}, …]}`}
	}
	// Each key checked under the name its caller gave it.
	keyName := "idempotency_key"
	if req.IdempotencyKey == "" {
		req.IdempotencyKey, keyName = m.IdempotencyKey, HeaderIdempotencyKey
	}
	cmds := make([]aggregate.MultiRequest, len(req.Commands))
	for i, c := range req.Commands {
		key, name := c.IdempotencyKey, fmt.Sprintf("commands[%d].idempotency_key", i)
		if key == "" {
			key, name = req.IdempotencyKey, keyName
		}
		if err := checkKeyAs(key, name); err != nil {
			return MultiResult{}, err
		}
		cmds[i] = aggregate.MultiRequest{ExpectedVersion: c.ExpectedVersion, Request: aggregate.Request{
			Type: c.Type, ID: c.ID, Kind: c.Command, Payload: c.Payload, IdempotencyKey: key,
			CorrelationID: m.CorrelationID, CausationID: m.CausationID, TraceParent: tp,
		}}
	}
	res, err := s.repo.HandleAll(ctx, cmds)
	if err != nil {
		return MultiResult{}, multiError(err)
	}
	return MultiResult{Results: res}, nil
}

// multiError answers a stale aggregate with 409 version_conflict naming it,
// and a rejection with the domain's code, saying which command it was.
func multiError(err error) error {
	var stale *aggregate.StaleError
	if errors.As(err, &stale) {
		v := stale.Actual
		return &Error{Status: 409, Code: CodeVersionConflict, Message: err.Error(), Version: &v}
	}
	var rej *aggregate.Rejection
	if errors.As(err, &rej) {
		e := toError(err)
		e.Message = fmt.Sprintf("%s (nothing was appended to any aggregate of the request)", userMessage(err.Error()))
		return e
	}
	return err
}

// multiRoutes registers the HTTP route.
func (s *Service) multiRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/multi", func(w http.ResponseWriter, r *http.Request) {
		body, ok := s.readBody(w, r)
		if !ok {
			return
		}
		res, err := s.Multi(r.Context(), body, httpMeta(r))
		s.reply(w, http.StatusOK, res, err)
	})
}

package services

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/receiver"
)

// inProgressRetryAfter is the retry hint when another delivery of the same
// command is still running.
const inProgressRetryAfter = 500 * time.Millisecond

// dispatch hands a request to its own goroutine, so that a slow request
// holds up no other.
func (s *Services) dispatch(ep endpoint, m *nats.Msg) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = m.Respond(failure(&Failure{Message: "demo services are shutting down", Retryable: true}))
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		s.handle(ep, m)
	}()
}

func (s *Services) handle(ep endpoint, m *nats.Msg) {
	key := m.Header.Get(HeaderIdempotencyKey)
	log := s.logger.With("subject", ep.subject, "command_id", m.Header.Get(HeaderCommandID), "attempt", m.Header.Get(HeaderAttempt))
	if key == "" {
		s.respond(m, log, nil, terminal("missing "+HeaderIdempotencyKey+" header: every request must carry one (esjet sends the command id)"))
		return
	}
	fence, err := receiver.ParseFence(m.Header.Get(HeaderFence))
	if err != nil {
		s.respond(m, log, nil, terminal(err.Error()))
		return
	}
	res, replayed, err := s.rcv.DoFenced(s.ctx, key, fence, m.Data, func(ctx context.Context) (json.RawMessage, error) {
		return s.perform(ctx, ep, m.Data)
	})
	if errors.Is(err, receiver.ErrNotRecorded) && res != nil {
		// The effect happened: say so, or the caller would retry it.
		log.Warn("effect performed but not recorded", "error", err)
		err = nil
	}
	log.Debug("handled", "replayed", replayed, "error", err)
	s.respond(m, log, res, err)
}

// perform applies the service's mode, then runs the effect.
func (s *Services) perform(ctx context.Context, ep endpoint, payload []byte) (json.RawMessage, error) {
	switch mode := s.take(ep.service); mode.Kind {
	case Transient:
		return nil, &Failure{Message: transientErrorMessage, Retryable: true, RetryAfter: transientRetryAfter}
	case Terminal:
		return nil, terminal(refusal[ep.service])
	case Slow:
		t := time.NewTimer(mode.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, &Failure{Message: "demo services are shutting down", Retryable: true}
		}
	}
	v, err := ep.effect(payload)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.effects[ep.subject]++
	s.mu.Unlock()
	return data, nil
}

// respond turns a result or an error into the protocol's reply.
func (s *Services) respond(m *nats.Msg, log interface{ Warn(string, ...any) }, res json.RawMessage, err error) {
	var body []byte
	var f *Failure
	switch {
	case err == nil:
		body = success(res)
	case errors.As(err, &f):
		body = failure(f)
	case errors.Is(err, receiver.ErrStale):
		body = failure(&Failure{Message: err.Error(), Stale: true})
	case errors.Is(err, receiver.ErrConflict), errors.Is(err, receiver.ErrInvalidKey):
		body = failure(terminal(err.Error()))
	case errors.Is(err, receiver.ErrInProgress):
		body = failure(&Failure{Message: err.Error(), Retryable: true, RetryAfter: inProgressRetryAfter})
	default: // the receipts bucket is unreachable, the server is restarting…
		body = failure(&Failure{Message: fmt.Sprintf("demo services: %v", err), Retryable: true})
	}
	if m.Reply == "" {
		return // published, not requested: nobody to tell
	}
	if rerr := m.Respond(body); rerr != nil {
		log.Warn("reply failed", "error", rerr)
	}
}

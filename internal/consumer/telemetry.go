package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"
)

// What a worker tells internal/telemetry: a span per delivery (started in
// handle, child of the relay's span the OUTBOX message names), a client
// span per attempt whose traceparent the target receives (the Delivery's
// TraceParent, so NATS and HTTP targets get it as a header and a Go
// handler in its ctx), and the attempt's result and duration.

// tracedAttempt runs attempt under a call span: the target is called with
// that span's traceparent.
func (w *Worker) tracedAttempt(ctx context.Context, stop <-chan struct{}, log *slog.Logger, m jetstream.Msg, d Delivery, l *lease) (json.RawMessage, error) {
	ctx, call := w.cfg.Telemetry.StartCall(ctx, w.cfg.Kind, d.TraceParent)
	d.TraceParent = call.TraceParent()
	result, err := w.attempt(ctx, stop, log, m, d, l)
	call.End(attemptResult(err), err)
	return result, err
}

// attemptResult is the result label of an attempt's error.
func attemptResult(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, errLeaseLost):
		return "lease_lost"
	case errors.Is(err, errStopping):
		return "stopping"
	}
	switch v, _ := classify(err); v {
	case terminal:
		return "terminal"
	case stale:
		return "stale"
	case unavailable:
		return "unavailable"
	}
	return "retryable"
}

// Kind is the command kind the worker carries out.
func (w *Worker) Kind() string { return w.cfg.Kind }

// Pool is how many commands of its kind the worker handles at once.
func (w *Worker) Pool() int { return w.cfg.Workers }

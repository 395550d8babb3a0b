package api

import (
	"context"
	"time"

	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/telemetry"
)

// What the API tells internal/telemetry: every command and raw append
// counted by type, command and result (esjet_commands_total) and timed,
// and a span per command whose parent is the client's traceparent — the
// first span of the saga's trace. The traceparent recorded with the
// decision is the span's own, never the client's value as given.

// rawLabel is the type and command label of raw appends: their types are
// not registered, so naming them would make the label unbounded.
const rawLabel = "raw"

// multiLabel is the type and command label of a multi-aggregate request
// (one count for the request, whatever it holds).
const multiLabel = "multi"

// knownKinds lists, per registered type, the kinds it handles (commands
// and outcomes): the only label values a request's words may become.
func knownKinds(reg *aggregate.Registry) map[string]map[string]bool {
	known := map[string]map[string]bool{}
	for _, typ := range reg.Types() {
		def, err := reg.Get(typ)
		if err != nil {
			continue
		}
		kinds := map[string]bool{}
		for _, k := range append(def.Commands(), def.Outcomes()...) {
			kinds[k] = true
		}
		known[typ] = kinds
	}
	return known
}

// labels bounds a request's type and command to what the node serves.
func (s *Service) labels(typ, kind string) (string, string) {
	kinds, ok := s.known[typ]
	if !ok {
		return telemetry.Unknown, telemetry.Unknown
	}
	if !kinds[kind] {
		return typ, telemetry.Unknown
	}
	return typ, kind
}

// startCommand starts a command's span under the client's traceparent tp
// (a malformed one is dropped: checkMeta answers it 400) and returns the
// traceparent to record and the function that counts and ends it. lt and
// lk are the type and command labels ([Service.labels]).
func (s *Service) startCommand(ctx context.Context, lt, lk, tp string) (context.Context, string, func(aggregate.Result, error)) {
	start := time.Now()
	ctx, sp := s.tel.StartCommand(ctx, lt, lk, tp)
	return ctx, sp.TraceParent(), func(res aggregate.Result, err error) {
		status := Status(err)
		s.tel.CommandDone(lt, lk, telemetry.ResultOf(status, res.Replayed), time.Since(start))
		if status >= 500 {
			sp.End(err)
			return
		}
		sp.End(nil)
	}
}

// countRaw counts a raw append that may end before its span starts (bad
// input); the span, once started, is ended by startCommand's function.
func (s *Service) countRaw(start time.Time) func(aggregate.Result, error) {
	return func(res aggregate.Result, err error) {
		s.tel.CommandDone(rawLabel, rawLabel, telemetry.ResultOf(Status(err), res.Replayed), time.Since(start))
	}
}

package telemetry

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/esjet/esjet/internal/wire"
)

// TracerName is the instrumentation scope of esjet's spans.
const TracerName = "github.com/esjet/esjet"

// startTracing makes the tracer provider. Spans are always made (so every
// decision records a trace id and the logs carry it); they leave the
// process only through the exporter the environment names:
//
//	OTEL_TRACES_EXPORTER=otlp (or OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT set): OTLP over HTTP
//	OTEL_TRACES_EXPORTER=console: JSON on stdout
//	unset or none, or OTEL_SDK_DISABLED=true: nowhere
//
// The OTLP exporter reads its own OTEL_EXPORTER_OTLP_* settings (endpoint,
// headers, timeout, TLS); OTEL_TRACES_SAMPLER, OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES are honoured as the SDK documents.
func (t *Telemetry) startTracing(ctx context.Context, cfg Config) error {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "esjet"), attribute.String("esjet.namespace", cfg.Namespace)),
		resource.WithFromEnv())
	if err != nil {
		t.logger.Warn("OTEL resource attributes partly ignored", "error", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	exp, name, err := exporterFromEnv(ctx, getenv)
	if err != nil {
		return err
	}
	t.exporter = name
	if exp != nil {
		opts = append(opts, sdktrace.WithBatcher(exp))
		t.logger.Info("exporting traces", "exporter", name)
	}
	if cfg.SpanProcessor != nil {
		opts = append(opts, sdktrace.WithSpanProcessor(cfg.SpanProcessor))
	}
	t.tp = sdktrace.NewTracerProvider(opts...)
	t.tracer = t.tp.Tracer(TracerName)
	return nil
}

// exporterFromEnv picks the trace exporter the OTEL_* variables name.
func exporterFromEnv(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, string, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return nil, "none", nil
	}
	name := strings.TrimSpace(strings.ToLower(getenv("OTEL_TRACES_EXPORTER")))
	if name == "" {
		name = "none"
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
			name = "otlp"
		}
	}
	switch name {
	case "none":
		return nil, name, nil
	case "console":
		exp, err := stdouttrace.New()
		if err != nil {
			return nil, name, fmt.Errorf("%w: console: %w", ErrExporter, err)
		}
		return exp, name, nil
	case "otlp":
		proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
		if proto == "" {
			proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
		if proto != "" && proto != "http/protobuf" {
			return nil, name, fmt.Errorf("%w: OTEL_EXPORTER_OTLP_PROTOCOL=%s is not supported: esjet exports OTLP over HTTP; set http/protobuf (or leave it unset) and point OTEL_EXPORTER_OTLP_ENDPOINT at the collector's HTTP port (4318)", ErrExporter, proto)
		}
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, name, fmt.Errorf("%w: otlp: %w", ErrExporter, err)
		}
		return exp, name, nil
	default:
		return nil, name, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%s is not supported: use otlp, console or none", ErrExporter, name)
	}
}

// ParseTraceParent reads a W3C traceparent (version 00, or a later version
// read as 00 allows: its first four fields, then "-" and more). ok is false
// for anything that is not one (wrong shape, upper case, version ff,
// all-zero ids): such a value is dropped, never recorded.
func ParseTraceParent(tp string) (trace.SpanContext, bool) {
	if len(tp) < 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' || !lowerHex(tp[:2]) || tp[:2] == "ff" ||
		(tp[:2] == "00" && len(tp) != 55) || (len(tp) > 55 && tp[55] != '-') {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	var flags [1]byte
	if !decodeHex(tid[:], tp[3:35]) || !decodeHex(sid[:], tp[36:52]) || !decodeHex(flags[:], tp[53:55]) {
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: trace.TraceFlags(flags[0]), Remote: true})
	return sc, sc.IsValid()
}

// FormatTraceParent writes sc as a W3C traceparent ("" for an invalid one).
func FormatTraceParent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	flags := sc.TraceFlags()
	b := make([]byte, 0, 55)
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, tid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, []byte{byte(flags)})
	return string(b)
}

// lowerHex says whether s is lower-case hexadecimal (W3C allows no other).
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// decodeHex decodes lower-case hex s into dst (len(s) = 2·len(dst)).
func decodeHex(dst []byte, s string) bool {
	if !lowerHex(s) {
		return false
	}
	_, err := hex.Decode(dst, []byte(s))
	return err == nil
}

// TraceParent is ctx's span as a W3C traceparent ("" when there is none).
func TraceParent(ctx context.Context) string {
	return FormatTraceParent(trace.SpanContextFromContext(ctx))
}

// TraceIDOf is the trace id of a traceparent ("" when it is not one).
func TraceIDOf(tp string) string {
	if sc, ok := ParseTraceParent(tp); ok {
		return sc.TraceID().String()
	}
	return ""
}

// Span is one step of a trace. The zero Span (from a nil Telemetry) does
// nothing and its TraceParent is the one it was given.
type Span struct {
	span trace.Span
	tp   string
}

// TraceParent is what to record or send on: the span's own context as a
// W3C traceparent, so the next step is its child.
func (s Span) TraceParent() string {
	if s.span == nil {
		return s.tp
	}
	return FormatTraceParent(s.span.SpanContext())
}

// TraceID is the span's trace id ("" without a span).
func (s Span) TraceID() string {
	if s.span == nil {
		return TraceIDOf(s.tp)
	}
	return s.span.SpanContext().TraceID().String()
}

// SetAttributes adds attributes (ids are fine here: spans are not metrics).
func (s Span) SetAttributes(kv ...attribute.KeyValue) {
	if s.span != nil {
		s.span.SetAttributes(kv...)
	}
}

// End ends the span; a non-nil err marks it failed.
func (s Span) End(err error) {
	if s.span == nil {
		return
	}
	if err != nil {
		s.span.SetStatus(codes.Error, err.Error())
	}
	s.span.End()
}

// start starts a span under parent (a remote one, or ctx's own span when
// parent is invalid).
func (t *Telemetry) start(ctx context.Context, parent trace.SpanContext, name string, kind trace.SpanKind, opts ...trace.SpanStartOption) (context.Context, Span) {
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	ctx, sp := t.tracer.Start(ctx, name, append(opts, trace.WithSpanKind(kind))...)
	return ctx, Span{span: sp}
}

// StartCommand starts the span of a command a client sent (HTTP, NATS, or
// Go). Its parent is the client's traceparent tp when that is W3C, else
// ctx's span; a malformed tp is dropped (the span says so) and never
// recorded. Record Span.TraceParent with the decision.
func (t *Telemetry) StartCommand(ctx context.Context, typ, kind, tp string) (context.Context, Span) {
	if t == nil {
		return ctx, Span{tp: tp}
	}
	parent, ok := ParseTraceParent(tp)
	ctx, sp := t.start(ctx, parent, "esjet.command "+typ+"."+kind, trace.SpanKindServer,
		trace.WithAttributes(attribute.String("esjet.aggregate.type", typ), attribute.String("esjet.command.kind", kind)))
	if tp != "" && !ok {
		sp.SetAttributes(attribute.Bool("esjet.traceparent.dropped", true))
	}
	return ctx, sp
}

// StartOutcome starts the span of an outcome decision: a worker reporting
// <kind>_done or <kind>_failed, child of the worker's span in ctx, or of
// the worker's traceparent tp when the report came without its ctx (from
// an edge hub).
func (t *Telemetry) StartOutcome(ctx context.Context, typ, kind, tp string) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	var parent trace.SpanContext
	if !trace.SpanContextFromContext(ctx).IsValid() {
		parent, _ = ParseTraceParent(tp)
	}
	return t.start(ctx, parent, "esjet.outcome "+typ+"."+kind, trace.SpanKindInternal,
		trace.WithAttributes(attribute.String("esjet.aggregate.type", typ), attribute.String("esjet.command.kind", kind)))
}

// Relayed records the relay carrying the command m to OUTBOX: a producer
// span from when its decision was stored to now, child of the decision's
// traceparent, which m then carries on instead (the worker's parent).
func (t *Telemetry) Relayed(m *nats.Msg, stored time.Time) {
	if t == nil || m == nil {
		return
	}
	kind := m.Header.Get(wire.HeaderCommandKind)
	if !stored.IsZero() {
		t.m.relayDelay.Observe(max(time.Since(stored).Seconds(), 0))
	}
	parent, _ := ParseTraceParent(m.Header.Get(wire.HeaderTraceParent))
	opts := []trace.SpanStartOption{trace.WithAttributes(
		attribute.String("esjet.command.id", m.Header.Get(wire.HeaderCommandID)),
		attribute.String("esjet.command.kind", kind),
		attribute.String("esjet.decision.id", m.Header.Get(wire.HeaderDecisionID)),
		attribute.String("messaging.system", "nats"), attribute.String("messaging.destination.name", m.Subject))}
	if !stored.IsZero() {
		opts = append(opts, trace.WithTimestamp(stored))
	}
	_, sp := t.start(context.Background(), parent, "esjet.relay "+kind, trace.SpanKindProducer, opts...)
	m.Header.Set(wire.HeaderTraceParent, sp.TraceParent())
	sp.End(nil)
}

// StartDelivery starts a worker's span for one delivery of a command of
// kind, child of the traceparent the OUTBOX message h carries (the relay's
// span). The outcome reported under the returned ctx is its child.
func (t *Telemetry) StartDelivery(ctx context.Context, kind string, h nats.Header) (context.Context, Span) {
	if t == nil {
		return ctx, Span{tp: h.Get(wire.HeaderTraceParent)}
	}
	parent, _ := ParseTraceParent(h.Get(wire.HeaderTraceParent))
	return t.start(ctx, parent, "esjet.worker "+kind, trace.SpanKindConsumer, trace.WithAttributes(
		attribute.String("esjet.command.id", h.Get(wire.HeaderCommandID)),
		attribute.String("esjet.command.kind", kind),
		attribute.String("esjet.decision.id", h.Get(wire.HeaderDecisionID)),
		attribute.String("messaging.system", "nats")))
}

package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Config says what a node's telemetry is for. The zero value of every field
// means its default.
type Config struct {
	// Namespace labels every esjet_* metric (namespace="…") and the traces'
	// resource.
	Namespace string
	// SpanProcessor, if set, receives every span besides the exporter the
	// environment picks (tests: tracetest's in-memory exporter in a
	// sdktrace.NewSimpleSpanProcessor).
	SpanProcessor sdktrace.SpanProcessor
	// Getenv reads the OTEL_* variables. Nil means os.Getenv.
	Getenv func(string) string
	// Logger receives the exporter's choice and its errors. Nil discards.
	Logger *slog.Logger
}

// Telemetry is one node's metrics registry and tracer provider. A nil
// *Telemetry is valid: every method does nothing (a traceparent passes
// through unchanged). Its methods are safe for concurrent use.
type Telemetry struct {
	reg      *prometheus.Registry
	esjet    prometheus.Registerer // reg, with the namespace label
	tp       *sdktrace.TracerProvider
	tracer   trace.Tracer
	exporter string
	m        *metrics
	logger   *slog.Logger
}

// New makes a node's telemetry: a registry with the esjet metrics and the
// Go runtime and process collectors, and a tracer provider exporting as the
// OTEL_* environment says ([ErrExporter] for one it cannot make). Close it.
func New(ctx context.Context, cfg Config) (*Telemetry, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	reg := prometheus.NewRegistry()
	t := &Telemetry{reg: reg, logger: cfg.Logger.With("component", "telemetry")}
	t.esjet = prometheus.WrapRegistererWith(prometheus.Labels{"namespace": cfg.Namespace}, reg)
	if err := errors.Join(
		reg.Register(collectors.NewGoCollector()),
		reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})),
	); err != nil {
		return nil, err
	}
	m, err := newMetrics(t.esjet)
	if err != nil {
		return nil, err
	}
	t.m = m
	if err := t.startTracing(ctx, cfg); err != nil {
		return nil, err
	}
	return t, nil
}

// Handler serves the registry in the Prometheus text (or OpenMetrics)
// format. A collector that fails (JetStream not answering) leaves its
// figures out and the rest is served.
func (t *Telemetry) Handler() http.Handler {
	if t == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(t.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, Registry: t.reg})
}

// Register adds an esjet collector (its metrics get the namespace label).
func (t *Telemetry) Register(c prometheus.Collector) error {
	if t == nil {
		return nil
	}
	return t.esjet.Register(c)
}

// Registry is the node's registry, for tests that gather it directly.
func (t *Telemetry) Registry() *prometheus.Registry {
	if t == nil {
		return nil
	}
	return t.reg
}

// Exporter names where traces go: "none", "otlp" or "console".
func (t *Telemetry) Exporter() string {
	if t == nil {
		return "none"
	}
	return t.exporter
}

// Close flushes and stops the trace exporter. It is idempotent.
func (t *Telemetry) Close(ctx context.Context) error {
	if t == nil || t.tp == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

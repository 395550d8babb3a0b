package telemetry

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/esjet/esjet/internal/wire"
)

const clientTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func newTest(t *testing.T) (*Telemetry, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tel, err := New(t.Context(), Config{Namespace: "t", SpanProcessor: sdktrace.NewSimpleSpanProcessor(exp), Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Close(context.Background()) })
	return tel, exp
}

func TestACommandContinuesTheClientsTrace(t *testing.T) {
	tel, exp := newTest(t)
	_, sp := tel.StartCommand(t.Context(), "trip", "request_trip", clientTP)
	tp := sp.TraceParent()
	sp.End(nil)
	if !strings.HasPrefix(tp, "00-4bf92f3577b34da6a3ce929d0e0e4736-") || tp == clientTP {
		t.Fatalf("recorded traceparent %q: want the client's trace with the command's own span id", tp)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Parent.SpanID().String() != "00f067aa0ba902b7" || spans[0].Name != "esjet.command trip.request_trip" {
		t.Fatalf("spans = %+v", spans)
	}
}

func TestAMalformedTraceParentIsDroppedNotRecorded(t *testing.T) {
	tel, exp := newTest(t)
	for _, bad := range []string{"nope", strings.ToUpper(clientTP), "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", clientTP + "x"} {
		_, sp := tel.StartCommand(t.Context(), "trip", "request_trip", bad)
		tp := sp.TraceParent()
		sp.End(nil)
		if _, ok := ParseTraceParent(tp); !ok || tp == bad || strings.Contains(tp, "4bf92f3577b34da6a3ce929d0e0e4736") {
			t.Errorf("traceparent %q recorded as %q: want a new trace", bad, tp)
		}
	}
	for _, s := range exp.GetSpans() {
		if s.Parent.IsValid() {
			t.Errorf("span %s has parent %s: a malformed traceparent must start a new trace", s.Name, s.Parent.SpanID())
		}
	}
}

func TestWithoutTelemetryTheTraceParentPassesThrough(t *testing.T) {
	var tel *Telemetry
	_, sp := tel.StartCommand(t.Context(), "trip", "x", clientTP)
	if sp.TraceParent() != clientTP {
		t.Fatalf("nil telemetry: %q", sp.TraceParent())
	}
	sp.End(nil)
	tel.CommandDone("trip", "x", ResultOK, 0)
	tel.Relayed(nats.NewMsg("x"), time.Time{})
}

func TestTheRelaySpanIsTheWorkersParent(t *testing.T) {
	tel, exp := newTest(t)
	m := nats.NewMsg("ns.outbox.lock_budget")
	m.Header.Set(wire.HeaderTraceParent, clientTP)
	m.Header.Set(wire.HeaderCommandKind, "lock_budget")
	tel.Relayed(m, time.Time{})
	ctx, sp := tel.StartDelivery(t.Context(), "lock_budget", m.Header)
	_, call := tel.StartCall(ctx, "lock_budget", "")
	call.End("ok", nil)
	sp.End(nil)
	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	relay, call2, worker := spans[0], spans[1], spans[2]
	if relay.Parent.SpanID().String() != "00f067aa0ba902b7" || worker.Parent.SpanID() != relay.SpanContext.SpanID() ||
		call2.Parent.SpanID() != worker.SpanContext.SpanID() {
		t.Fatalf("relay %s ← worker %s ← call %s: not a chain", relay.Name, worker.Name, call2.Name)
	}
	if got := m.Header.Get(wire.HeaderTraceParent); got != FormatTraceParent(relay.SpanContext) {
		t.Fatalf("OUTBOX message traceparent %q, want the relay span's", got)
	}
}

func TestExporterFromTheEnvironment(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, c := range []struct {
		getenv func(string) string
		want   string
		err    bool
	}{
		{env(), "none", false},
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"), "otlp", false},
		{env("OTEL_TRACES_EXPORTER", "otlp"), "otlp", false},
		{env("OTEL_TRACES_EXPORTER", "console"), "console", false},
		{env("OTEL_TRACES_EXPORTER", "otlp", "OTEL_SDK_DISABLED", "true"), "none", false},
		{env("OTEL_TRACES_EXPORTER", "zipkin"), "", true},
		{env("OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), "", true},
	} {
		exp, name, err := exporterFromEnv(t.Context(), c.getenv)
		if c.err {
			if !errors.Is(err, ErrExporter) {
				t.Errorf("%s: err %v, want ErrExporter", name, err)
			}
			continue
		}
		if err != nil || name != c.want {
			t.Errorf("exporter %q (%v), want %q", name, err, c.want)
		}
		if exp != nil {
			_ = exp.Shutdown(t.Context())
		}
	}
}

// TestAnOutcomeWithoutItsContextContinuesTheWorkersTrace: an outcome that
// travelled without ctx (an edge hub's, pulled by its site) is the child of
// the worker's traceparent it carries.
func TestAnOutcomeWithoutItsContextContinuesTheWorkersTrace(t *testing.T) {
	tel, exp := newTest(t)
	_, sp := tel.StartOutcome(context.Background(), "trip", "lock_budget_done", clientTP)
	sp.End(nil)
	ctx, worker := tel.StartDelivery(context.Background(), "lock_budget", nats.Header{})
	_, sp = tel.StartOutcome(ctx, "trip", "lock_budget_done", clientTP)
	sp.End(nil)
	worker.End(nil)
	spans := exp.GetSpans()
	if spans[0].Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("outcome without ctx: parent %s, want the carried traceparent's", spans[0].Parent.SpanID())
	}
	if spans[1].Parent.SpanID() != spans[2].SpanContext.SpanID() {
		t.Errorf("outcome under the worker's ctx: parent %s, want the worker span %s", spans[1].Parent.SpanID(), spans[2].SpanContext.SpanID())
	}
	if TraceParent(ctx) != worker.TraceParent() || TraceParent(context.Background()) != "" {
		t.Errorf("TraceParent(ctx) = %q, want the worker's %q", TraceParent(ctx), worker.TraceParent())
	}
}

// TestParseTraceParentAgreesWithOpenTelemetry: the hand parser (it avoids
// the propagator's allocations on every command) accepts and reads what
// OpenTelemetry's W3C propagator does, and formats back what it would.
func TestParseTraceParentAgreesWithOpenTelemetry(t *testing.T) {
	var otelTC propagation.TraceContext
	for _, tp := range []string{clientTP, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
		strings.ToUpper(clientTP), "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01", "", "nope",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03"} {
		want := trace.SpanContextFromContext(otelTC.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp}))
		got, ok := ParseTraceParent(tp)
		if ok != want.IsValid() || (ok && (got.TraceID() != want.TraceID() || got.SpanID() != want.SpanID() || got.TraceFlags() != want.TraceFlags())) {
			t.Errorf("%q: parsed %v (ok %v), OpenTelemetry reads %v", tp, got, ok, want)
		}
		if ok {
			c := propagation.MapCarrier{}
			otelTC.Inject(trace.ContextWithSpanContext(context.Background(), got), c)
			if f := FormatTraceParent(got); f != c["traceparent"] {
				t.Errorf("%q formats as %q, OpenTelemetry as %q", tp, f, c["traceparent"])
			}
		}
	}
}

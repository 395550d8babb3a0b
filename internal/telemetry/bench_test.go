package telemetry

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/internal/wire"
)

// BenchmarkCommandTelemetry is what telemetry adds to one command on its
// way through a node with no exporter (the default): the command's span and
// counts, its decide and append timings, one relay span, a worker's
// delivery and call spans with their counts — beside the nil Telemetry
// (nothing recorded) as the baseline.
func BenchmarkCommandTelemetry(b *testing.B) {
	on, err := New(context.Background(), Config{Namespace: "b", Getenv: func(string) string { return "" }})
	if err != nil {
		b.Fatal(err)
	}
	defer on.Close(context.Background())
	for _, c := range []struct {
		name string
		tel  *Telemetry
	}{{"off", nil}, {"on", on}} {
		b.Run(c.name, func(b *testing.B) {
			tel := c.tel
			b.ReportAllocs()
			for b.Loop() {
				ctx, sp := tel.StartCommand(context.Background(), "trip", "request_trip", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
				tel.Decided("trip", time.Microsecond)
				tel.Appended(time.Millisecond)
				tp := sp.TraceParent()
				tel.CommandDone("trip", "request_trip", ResultOK, time.Millisecond)
				sp.End(nil)
				m := nats.NewMsg("b.outbox.lock_budget")
				m.Header.Set(wire.HeaderCommandKind, "lock_budget")
				m.Header.Set(wire.HeaderTraceParent, tp)
				tel.Relayed(m, time.Now())
				dctx, d := tel.StartDelivery(ctx, "lock_budget", m.Header)
				_, call := tel.StartCall(dctx, "lock_budget", "")
				_ = call.TraceParent()
				call.End("ok", nil)
				d.End(nil)
			}
		})
	}
}

package projection

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/esjet/esjet/internal/bench/raw"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// BenchmarkCatchUp: a no-op projection catching up over 20,000 decisions.
func BenchmarkCatchUp(b *testing.B) {
	e := newEnvB(b)
	var last streams.Record
	for i := range 20_000 {
		d := streams.Decision{ID: uuid.Must(uuid.NewV7()).String(), AggregateType: "acct", AggregateID: "a" + string(rune('a'+i%20)),
			Events: []streams.Event{{Type: "deposited", Data: []byte(`{"amount":100}`)}}}
		rec, err := e.log.Append(b.Context(), d, e.pos[d.AggregateID])
		if err != nil {
			b.Fatal(err)
		}
		e.pos[d.AggregateID] = rec.Position()
		last = rec
	}
	noop := func(context.Context, *Tx, Event) error { return nil }
	i := 0
	for b.Loop() {
		i++
		def := Definition{Name: "bench_" + string(rune('a'+i%26)) + uuid.NewString()[:4], Handle: noop}
		r, err := NewRunner(b.Context(), e.js, e.log, []Definition{def}, Config{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(b.Context())
		done := make(chan struct{})
		go func() { _ = r.Run(ctx); close(done) }()
		for caught := false; !caught; {
			for _, p := range r.Progress() {
				caught = caught || p.Position >= wire.EndOfSeq(last.Seq)
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
		<-done
	}
	b.ReportMetric(float64(20_000*b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkRawOrderedRead is the baseline of BenchmarkCatchUp: an ordered
// consumer over the same 20,000 messages, touching only the bytes.
func BenchmarkRawOrderedRead(b *testing.B) {
	e := newEnvB(b)
	for i := range 20_000 {
		d := streams.Decision{ID: uuid.Must(uuid.NewV7()).String(), AggregateType: "acct", AggregateID: "a" + string(rune('a'+i%20)),
			Events: []streams.Event{{Type: "deposited", Data: []byte(`{"amount":100}`)}}}
		rec, err := e.log.Append(b.Context(), d, e.pos[d.AggregateID])
		if err != nil {
			b.Fatal(err)
		}
		e.pos[d.AggregateID] = rec.Position()
	}
	for b.Loop() {
		if n, err := raw.Read(b.Context(), e.js, e.log.Names().Events, e.log.Names().EventsFilter(), 20_000); err != nil || n != 20_000 {
			b.Fatal(n, err)
		}
	}
	b.ReportMetric(float64(20_000*b.N)/b.Elapsed().Seconds(), "decisions/s")
}

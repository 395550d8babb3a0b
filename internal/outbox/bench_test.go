package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/internal/bench/raw"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Relay benchmarks, sync interval (the test server's default):
//
//	go test -run '^$' -bench Relay -benchtime 5x ./internal/outbox/
//
// BenchmarkRelayThroughput: each round fills a fresh namespace with 5,000
// decisions of one command each (untimed), then times the relay draining
// them into OUTBOX and raw.Relay, a raw JetStream consume + publish + ack
// of the same decisions (the relay's pipeline: same batch, async publishes,
// an ack per decision; no decoding, no headers built), alternating which
// goes first — so the ratio is esjet's cost over the floor.

const benchDecisions = 5000

// newBenchEnv provisions a fresh namespace on s (newRelayEnv, for a
// benchmark).
func newBenchEnv(b *testing.B, s *server.Server) *relayEnv {
	b.Helper()
	_, js := natstest.Connect(b, s)
	ns := natstest.Namespace(b)
	if _, err := streams.Provision(b.Context(), js, ns, streams.ProvisionConfig{}, nil); err != nil {
		b.Fatal(err)
	}
	l, err := streams.Open(b.Context(), js, ns, streams.Config{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return &relayEnv{js: js, ns: ns, log: l}
}

// fillDecisions appends benchDecisions decisions of one command each to a
// fresh namespace with 16 writers, and returns the last sequence.
func fillDecisions(b *testing.B, s *server.Server) (*relayEnv, uint64) {
	b.Helper()
	e := newBenchEnv(b, s)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var last uint64
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < benchDecisions; i += 16 {
				d := streams.Decision{ID: uuid.NewString(), AggregateType: "order", AggregateID: fmt.Sprintf("o%d", i),
					Events:   []streams.Event{{Type: "placed", Data: json.RawMessage(`{"sku":"abc-123","qty":2,"price":1999}`)}},
					Commands: []streams.Command{{Kind: "ship", Payload: json.RawMessage(`{"sku":"abc-123","qty":2,"to":"Lisbon"}`), Report: true}}}
				rec, err := e.log.Append(context.Background(), d, streams.Position{})
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				last = max(last, rec.Seq)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return e, last
}

// drainRelay runs a relay on e's namespace until it has relayed the
// decision at sequence last, and returns the time from before the relay
// was built until then (stopping it is not timed).
func drainRelay(ctx context.Context, e *relayEnv, last uint64) (time.Duration, error) {
	start := time.Now()
	r, err := NewRelay(ctx, e.js, e.ns, RelayConfig{}, nil)
	if err != nil {
		return 0, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() { cancel(); <-done }()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for r.Stats().LastSeq < last {
		select {
		case err := <-done:
			done <- err
			return 0, fmt.Errorf("relay stopped before sequence %d: %v", last, err)
		case <-tick.C:
		}
	}
	return time.Since(start), nil
}

func BenchmarkRelayThroughput(b *testing.B) {
	s := natstest.RunServer(b)
	var p raw.Pair
	for b.Loop() {
		b.StopTimer()
		e, last := fillDecisions(b, s)
		b.StartTimer()
		esjet := func() (time.Duration, error) { return drainRelay(b.Context(), e, last) }
		rawRelay := raw.Timed(func() error {
			return raw.Relay(b.Context(), e.js, e.log.Names().Events, e.ns+".outbox.raw", last, 0)
		})
		if err := p.Round(benchDecisions, esjet, rawRelay); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(p.Esjet.PerSecond(), "esjet-cmd/s")
	b.ReportMetric(p.Raw.PerSecond(), "raw-cmd/s")
	b.ReportMetric(p.Ratio(), "ratio")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkRelayLatency appends decisions at a steady 1,000/s with the relay
// running and measures, per command, the time from the append's ack to the
// command arriving on its OUTBOX subject.
func BenchmarkRelayLatency(b *testing.B) {
	e := newBenchEnv(b, natstest.RunServer(b))
	js, ns, l := e.js, e.ns, e.log
	r, err := NewRelay(b.Context(), js, ns, RelayConfig{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	var mu sync.Mutex
	acked := map[string]time.Time{}
	arrived := map[string]time.Time{}
	var lat []time.Duration
	sub, err := js.Conn().Subscribe(ns+".outbox.>", func(m *nats.Msg) {
		now := time.Now()
		mu.Lock()
		id := m.Header.Get(wire.HeaderCommandID)
		if t0, ok := acked[id]; ok {
			lat = append(lat, now.Sub(t0))
		} else {
			arrived[id] = now // relayed before the append's caller even had its ack
		}
		mu.Unlock()
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()

	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	i := 0
	for b.Loop() {
		<-tick.C
		d := streams.Decision{ID: uuid.NewString(), AggregateType: "order", AggregateID: fmt.Sprintf("l%d", i),
			Events:   []streams.Event{{Type: "placed"}},
			Commands: []streams.Command{{Kind: "ship", Payload: json.RawMessage(`{"qty":1}`)}}}
		rec, err := l.Append(context.Background(), d, streams.Position{})
		if err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		if _, early := arrived[rec.Commands[0].ID]; early {
			lat = append(lat, 0)
		} else {
			acked[rec.Commands[0].ID] = time.Now()
		}
		mu.Unlock()
		i++
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(lat)
		mu.Unlock()
		if n >= i || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	if len(lat) == 0 {
		b.Fatal("no command arrived")
	}
	pct := func(p float64) float64 { return float64(lat[int(float64(len(lat)-1)*p)]) / float64(time.Millisecond) }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(len(lat)), "commands")
}

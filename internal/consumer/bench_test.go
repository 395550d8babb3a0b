package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/bench/raw"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// BenchmarkEffects: each round publishes 5,000 commands of a fresh kind to
// OUTBOX (untimed), then times esjet workers with a no-op Go handler
// draining them (one node: one worker pool of 64; two nodes: two pools of
// 32 on separate connections) and raw.FetchAck, a durable pull consumer
// doing fetch (batches of 256) + ack of the same messages, alternating
// which goes first.
//
//	go test -run '^$' -bench Effects -benchtime 3x ./internal/consumer/
func BenchmarkEffects(b *testing.B) {
	for _, nodes := range []int{1, 2} {
		b.Run(fmt.Sprintf("nodes-%d", nodes), func(b *testing.B) {
			s := natstest.RunServer(b)
			_, js := natstest.Connect(b, s)
			ns := natstest.Namespace(b)
			if _, err := streams.Provision(b.Context(), js, ns, streams.ProvisionConfig{}, nil); err != nil {
				b.Fatal(err)
			}
			conns := make([]jetstream.JetStream, nodes)
			for i := range conns {
				_, conns[i] = natstest.Connect(b, s)
			}
			const n = 5000
			var p raw.Pair
			for round := 0; b.Loop(); round++ {
				b.StopTimer()
				kind := fmt.Sprintf("noop%d", round)
				if err := publishCommands(b.Context(), js, ns, kind, n); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				esjet := func() (time.Duration, error) { return drainWorkers(b.Context(), conns, ns, kind, n) }
				fetchAck := raw.Timed(func() error {
					return raw.FetchAck(b.Context(), js, streams.NamesFor(ns).Outbox, "raw-"+kind, wire.CommandSubject(ns, kind), n)
				})
				if err := p.Round(n, esjet, fetchAck); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(p.Esjet.PerSecond(), "esjet-effects/s")
			b.ReportMetric(p.Raw.PerSecond(), "raw-fetch+ack/s")
			b.ReportMetric(p.Ratio(), "ratio")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// drainWorkers runs one worker pool of 64/len(conns) no-op workers for kind
// per connection (a node each) until they have done n commands, and returns
// the time from before the workers were built until then (stopping them is
// not timed).
func drainWorkers(ctx context.Context, conns []jetstream.JetStream, ns, kind string, n int) (time.Duration, error) {
	start := time.Now()
	wctx, cancel := context.WithCancel(ctx)
	var workers []*Worker
	done := make(chan struct{}, len(conns))
	defer func() {
		cancel()
		for range workers {
			<-done
		}
	}()
	noop := HandlerFunc(func(context.Context, Delivery) (json.RawMessage, error) { return nil, nil })
	for i, js := range conns {
		w, err := NewWorker(ctx, js, ns, KindConfig{Kind: kind, Workers: 64 / len(conns), Handler: noop, Node: fmt.Sprint(i)}, nil, nil)
		if err != nil {
			return 0, err
		}
		workers = append(workers, w)
		go func() { _ = w.Run(wctx); done <- struct{}{} }()
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		total := int64(0)
		for _, w := range workers {
			total += w.Stats().Done
		}
		if total >= int64(n) {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
		}
	}
}

// publishCommands puts n commands of kind in OUTBOX as the relay would,
// encoded by wire.EncodeCommand.
func publishCommands(ctx context.Context, js jetstream.JetStream, ns, kind string, n int) error {
	now := time.Now()
	return raw.PublishAll(ctx, js, n, func(i int) *nats.Msg {
		id := fmt.Sprintf("a%d-%s", i, kind)
		rec := streams.Record{Seq: uint64(i + 1), Decision: streams.Decision{ID: "d-" + id, AggregateType: "acct", AggregateID: id,
			Events: []streams.Event{{Type: "charge_requested", Version: 1}}}}
		return wire.EncodeCommand(ns, rec, streams.Command{ID: wire.CommandID("acct", id, 1, 0), Kind: kind,
			Payload: json.RawMessage(`{"amount":100,"currency":"EUR"}`)}, now)
	})
}

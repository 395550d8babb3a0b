package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// BenchmarkEffects: each round publishes 5,000 commands of a fresh kind to
// OUTBOX (untimed), then times esjet workers with a no-op Go handler
// draining them (one node: one worker pool of 64; two nodes: two pools of
// 32 on separate connections), then a raw durable pull consumer doing fetch
// (batches of 256) + ack of the same messages, in the same run.
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
			const n = 5000
			var esjetTime, rawTime time.Duration
			round := 0
			for b.Loop() {
				b.StopTimer()
				kind := fmt.Sprintf("noop%d", round)
				publishCommands(b, js, ns, kind, n)
				b.StartTimer()

				start := time.Now()
				var workers []*Worker
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{}, nodes)
				for i := range nodes {
					_, njs := natstest.Connect(b, s)
					w, err := NewWorker(b.Context(), njs, ns, KindConfig{Kind: kind, Workers: 64 / nodes,
						Handler: HandlerFunc(func(context.Context, Delivery) (json.RawMessage, error) { return nil, nil }), Node: fmt.Sprint(i)}, nil, nil)
					if err != nil {
						b.Fatal(err)
					}
					workers = append(workers, w)
					go func() { _ = w.Run(ctx); done <- struct{}{} }()
				}
				for {
					total := int64(0)
					for _, w := range workers {
						total += w.Stats().Done
					}
					if total >= n {
						break
					}
					time.Sleep(time.Millisecond)
				}
				esjetTime += time.Since(start)
				cancel()
				for range nodes {
					<-done
				}

				start = time.Now()
				if err := rawFetchAck(b.Context(), js, ns, kind, n); err != nil {
					b.Fatal(err)
				}
				rawTime += time.Since(start)
				round++
			}
			total := float64(round * n)
			b.ReportMetric(total/esjetTime.Seconds(), "esjet-effects/s")
			b.ReportMetric(total/rawTime.Seconds(), "raw-fetch+ack/s")
			b.ReportMetric(rawTime.Seconds()/esjetTime.Seconds(), "ratio")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func publishCommands(b *testing.B, js jetstream.JetStream, ns, kind string, n int) {
	b.Helper()
	pub, _ := jetstream.New(js.Conn(), jetstream.WithPublishAsyncMaxPending(4096))
	for i := range n {
		id := fmt.Sprintf("acct:a%d:1:0", i)
		m := nats.NewMsg(wire.CommandSubject(ns, kind))
		m.Data = []byte(`{"amount":100,"currency":"EUR"}`)
		for k, v := range map[string]string{jetstream.MsgIDHeader: id + kind, wire.HeaderCommandID: id + "-" + kind,
			wire.HeaderCommandKind: kind, wire.HeaderAggregateType: "acct", wire.HeaderAggregateID: fmt.Sprint("a", i),
			wire.HeaderVersion: "1", wire.HeaderReport: "false"} {
			m.Header.Set(k, v)
		}
		if _, err := pub.PublishMsgAsync(m); err != nil {
			b.Fatal(err)
		}
	}
	<-pub.PublishAsyncComplete()
}

// rawFetchAck drains n messages of kind with a plain durable pull consumer:
// fetch 256 at a time, ack each (fire and forget: the floor JetStream
// offers; the workers also read and write a receipt per command and wait
// for each ack's confirmation).
func rawFetchAck(ctx context.Context, js jetstream.JetStream, ns, kind string, n int) error {
	cons, err := js.CreateOrUpdateConsumer(ctx, streams.NamesFor(ns).Outbox, jetstream.ConsumerConfig{
		Durable: "raw-" + kind, FilterSubject: wire.CommandSubject(ns, kind), AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 10_000,
	})
	if err != nil {
		return err
	}
	got := 0
	for got < n {
		batch, err := cons.Fetch(min(256, n-got), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return err
		}
		for m := range batch.Messages() {
			if err := m.Ack(); err != nil {
				return err
			}
			got++
		}
	}
	return nil
}

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
	"github.com/nats-io/nats.go/jetstream"

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
// them into OUTBOX, then a raw JetStream consume + publish + ack of the same
// decisions (same batch, same async publish and AckAll, no decoding, no
// headers built) — so the ratio is esjet's cost over the floor.

const benchDecisions = 5000

func fillDecisions(b *testing.B, s *server.Server) (*relayEnv, uint64) {
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
	var wg sync.WaitGroup
	var mu sync.Mutex
	var last uint64
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < benchDecisions; i += 16 {
				d := streams.Decision{ID: uuid.NewString(), AggregateType: "order", AggregateID: fmt.Sprintf("o%d", i),
					Events:   []streams.Event{{Type: "placed", Data: json.RawMessage(`{"sku":"abc-123","qty":2,"price":1999}`)}},
					Commands: []streams.Command{{Kind: "ship", Payload: json.RawMessage(`{"sku":"abc-123","qty":2,"to":"Lisbon"}`), Report: true}}}
				rec, err := l.Append(context.Background(), d, streams.Position{})
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
	return &relayEnv{js: js, ns: ns, log: l}, last
}

// rawRelay drains EVENTS into OUTBOX the minimal way — the relay's own
// pipeline (Consume with prefetch, batches of what has arrived, async
// publishes, an ack per decision with the batch's last one confirmed)
// without decoding decisions or building command messages — and returns
// when the message at seq last is acked.
func rawRelay(ctx context.Context, js jetstream.JetStream, ns string, last uint64) error {
	names := streams.NamesFor(ns)
	cons, err := js.CreateOrUpdateConsumer(ctx, names.Events, jetstream.ConsumerConfig{
		Durable: "raw-bench", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 256 * 8,
	})
	if err != nil {
		return err
	}
	pub, _ := jetstream.New(js.Conn(), jetstream.WithPublishAsyncMaxPending(256*16))
	in := make(chan jetstream.Msg, 256*4)
	cc, err := cons.Consume(func(m jetstream.Msg) { in <- m }, jetstream.PullMaxMessages(256*2))
	if err != nil {
		return err
	}
	defer cc.Stop()
	batch := make([]jetstream.Msg, 0, 256)
	for {
		batch = append(batch[:0], <-in)
	fill:
		for len(batch) < 256 {
			select {
			case m := <-in:
				batch = append(batch, m)
			default:
				break fill
			}
		}
		var futs []jetstream.PubAckFuture
		for _, m := range batch {
			out := nats.NewMsg(ns + ".outbox.raw")
			out.Data = m.Data()
			out.Header.Set(jetstream.MsgIDHeader, uuid.NewString())
			f, err := pub.PublishMsgAsync(out)
			if err != nil {
				return err
			}
			futs = append(futs, f)
		}
		for _, f := range futs {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return err
			}
		}
		for _, m := range batch[:len(batch)-1] {
			_ = m.Ack()
		}
		lastMsg := batch[len(batch)-1]
		if err := lastMsg.DoubleAck(ctx); err != nil {
			return err
		}
		if meta, _ := lastMsg.Metadata(); meta != nil && meta.Sequence.Stream >= last {
			return nil
		}
	}
}

func BenchmarkRelayThroughput(b *testing.B) {
	s := natstest.RunServer(b)
	var esjetTime, rawTime time.Duration
	rounds := 0
	for b.Loop() {
		b.StopTimer()
		e, last := fillDecisions(b, s)
		b.StartTimer()

		start := time.Now()
		r, err := NewRelay(b.Context(), e.js, e.ns, RelayConfig{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		for r.Stats().LastSeq < last {
			time.Sleep(time.Millisecond)
		}
		esjetTime += time.Since(start)
		cancel()
		<-done

		start = time.Now()
		if err := rawRelay(b.Context(), e.js, e.ns, last); err != nil {
			b.Fatal(err)
		}
		rawTime += time.Since(start)
		rounds++
	}
	n := float64(rounds * benchDecisions)
	b.ReportMetric(n/esjetTime.Seconds(), "esjet-cmd/s")
	b.ReportMetric(n/rawTime.Seconds(), "raw-cmd/s")
	b.ReportMetric(rawTime.Seconds()/esjetTime.Seconds(), "ratio")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkRelayLatency appends decisions at a steady 1,000/s with the relay
// running and measures, per command, the time from the append's ack to the
// command arriving on its OUTBOX subject.
func BenchmarkRelayLatency(b *testing.B) {
	s := natstest.RunServer(b)
	_, js := natstest.Connect(b, s)
	ns := natstest.Namespace(b)
	if _, err := streams.Provision(b.Context(), js, ns, streams.ProvisionConfig{}, nil); err != nil {
		b.Fatal(err)
	}
	l, err := streams.Open(b.Context(), js, ns, streams.Config{}, nil)
	if err != nil {
		b.Fatal(err)
	}
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

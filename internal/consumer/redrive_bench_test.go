package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/bench/raw"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Issue 33: "a re-drive of 5,000 low-priority letters leaves live
// commands' p50 within 2× of their p50 without it". Each round runs one
// node's pool of 8 workers for a fresh kind, a target taking 2 ms, and
// sends 100 live (normal) commands at 50/s twice: alone, then with 5,000
// low commands (a DLQ re-drive's band) published just before. The latency
// of a live command is from its publish to the start of its call.
//
//	go test -run '^$' -bench LiveBesideARedrive -benchtime 3x ./internal/consumer/
//
// It reports the live p50 alone and beside the re-drive, their ratio (the
// goal: at most 2), the live p90 beside the re-drive and how many low
// commands ran while the live ones did.
func BenchmarkLiveBesideARedrive(b *testing.B) {
	const (
		pool, live, lows = 8, 100, 5000
		every            = 20 * time.Millisecond // 50/s
		work             = 2 * time.Millisecond
	)
	s := natstest.RunServer(b)
	_, js := natstest.Connect(b, s)
	ns := natstest.Namespace(b)
	if _, err := streams.Provision(b.Context(), js, ns, streams.ProvisionConfig{}, nil); err != nil {
		b.Fatal(err)
	}
	var alone, beside, besideP90, lowsRan []float64
	for round := 0; b.Loop(); round++ {
		kind := fmt.Sprintf("pay%d", round)
		t := newLiveTarget(work)
		w, err := NewWorker(b.Context(), js, ns, KindConfig{Kind: kind, Workers: pool, Handler: t, AckWait: 30 * time.Second, Node: "bench"}, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(b.Context())
		done := make(chan struct{})
		go func() { _ = w.Run(ctx); close(done) }()

		lat, err := sendLive(ctx, js, ns, kind, "a", live, every, t)
		if err != nil {
			b.Fatal(err)
		}
		alone = append(alone, ms(quantile(lat, 0.5)))
		if err := raw.PublishAll(ctx, js, lows, func(i int) *nats.Msg {
			return bandCommand(ns, kind, fmt.Sprintf("low-%s-%d", kind, i), wire.PriorityLow)
		}); err != nil {
			b.Fatal(err)
		}
		before := t.lowCalls()
		lat, err = sendLive(ctx, js, ns, kind, "b", live, every, t)
		if err != nil {
			b.Fatal(err)
		}
		ran := t.lowCalls() - before
		if ran == 0 || ran >= lows {
			b.Fatalf("%d of %d low commands ran while the live ones did: the re-drive did not run beside them", ran, lows)
		}
		beside = append(beside, ms(quantile(lat, 0.5)))
		besideP90 = append(besideP90, ms(quantile(lat, 0.9)))
		lowsRan = append(lowsRan, float64(ran))
		cancel()
		<-done
	}
	a, r := median(alone), median(beside)
	b.ReportMetric(a, "live-p50-ms")
	b.ReportMetric(r, "live-p50-redrive-ms")
	b.ReportMetric(r/a, "ratio")
	b.ReportMetric(median(besideP90), "live-p90-redrive-ms")
	b.ReportMetric(median(lowsRan), "lows-ran")
	b.ReportMetric(0, "ns/op")
}

// liveTarget takes work per call and records when each live command's
// call started.
type liveTarget struct {
	work time.Duration

	mu      sync.Mutex
	started map[string]time.Time
	lows    int
	arrived chan string
}

func newLiveTarget(work time.Duration) *liveTarget {
	return &liveTarget{work: work, started: map[string]time.Time{}, arrived: make(chan string, 1024)}
}

func (t *liveTarget) Handle(ctx context.Context, d Delivery) (json.RawMessage, error) {
	now := time.Now()
	t.mu.Lock()
	if d.Priority == wire.PriorityLow {
		t.lows++
	} else if _, ok := t.started[d.AggregateID]; !ok {
		t.started[d.AggregateID] = now
		t.arrived <- d.AggregateID
	}
	t.mu.Unlock()
	select {
	case <-time.After(t.work):
	case <-ctx.Done():
	}
	return nil, nil
}

func (t *liveTarget) lowCalls() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lows
}

// sendLive publishes n normal commands of kind, one every interval, and
// returns each one's time from publish to the start of its call.
func sendLive(ctx context.Context, js jetstream.JetStream, ns, kind, prefix string, n int, every time.Duration, t *liveTarget) ([]time.Duration, error) {
	sent := map[string]time.Time{}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := range n {
		id := fmt.Sprintf("live-%s-%s%d", kind, prefix, i) // receipts are by command id: one per round
		sent[id] = time.Now()
		if _, err := js.PublishMsg(ctx, bandCommand(ns, kind, id, wire.PriorityNormal)); err != nil {
			return nil, err
		}
		<-tick.C
	}
	lat := make([]time.Duration, 0, n)
	for len(lat) < n {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("%d of %d live commands called within 30 s", len(lat), n)
		case id := <-t.arrived:
			if at, ok := sent[id]; ok && strings.HasPrefix(id, "live-"+kind+"-"+prefix) {
				t.mu.Lock()
				lat = append(lat, t.started[id].Sub(at))
				t.mu.Unlock()
			}
		}
	}
	return lat, nil
}

// bandCommand is a command of kind for aggregate id in band priority, as
// the relay (or a re-drive) publishes it.
func bandCommand(ns, kind, id, priority string) *nats.Msg {
	cmdID := wire.CommandID("trip", id, 1, 0)
	m := nats.NewMsg(wire.BandSubject(ns, kind, priority))
	m.Data = []byte(`{}`)
	for k, v := range map[string]string{
		jetstream.MsgIDHeader: kind + "/" + cmdID, wire.HeaderCommandID: cmdID, wire.HeaderCommandKind: kind,
		wire.HeaderAggregateType: "trip", wire.HeaderAggregateID: id, wire.HeaderVersion: "1", wire.HeaderDecisionID: "d-" + id,
	} {
		m.Header.Set(k, v)
	}
	if priority != wire.PriorityNormal {
		m.Header.Set(wire.HeaderPriority, priority)
	}
	return m
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/outbox"
	"github.com/esjet/esjet/internal/streams"
)

// BenchmarkReconcileScan times a full reconcile of 5,000 decisions and their
// 5,000 OUTBOX messages, reporting messages scanned per second.
//
//	go test -run '^$' -bench ReconcileScan ./internal/ops/
func BenchmarkReconcileScan(b *testing.B) {
	const decisions = 5000
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
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < decisions; i += 16 {
				d := streams.Decision{ID: uuid.NewString(), AggregateType: "order", AggregateID: fmt.Sprintf("o%d", i),
					Events:   []streams.Event{{Type: "placed"}},
					Commands: []streams.Command{{Kind: "ship", Payload: json.RawMessage(`{"qty":2}`), Report: true}}}
				if _, err := l.Append(context.Background(), d, streams.Position{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	r, err := outbox.NewRelay(b.Context(), js, ns, outbox.RelayConfig{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for r.Stats().Decisions < decisions {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	rc := NewReconciler(js, ns, ReconcileConfig{}, nil)
	scanned := 0
	for b.Loop() {
		rep, err := rc.Run(b.Context(), nil)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Drift() != 0 || rep.Totals.Issued != decisions {
			b.Fatalf("drift %d, issued %d", rep.Drift(), rep.Totals.Issued)
		}
		scanned += int(rep.Scanned.Events + rep.Scanned.Outbox)
	}
	b.ReportMetric(float64(scanned)/b.Elapsed().Seconds(), "msgs/s")
}

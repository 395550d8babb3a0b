package archive_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/esjet/esjet/internal/archive"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/projection"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// BenchmarkArchiveAtScale measures issue 34's done-when once, whatever
// b.N (run it with -benchtime 1x): ESJET_ARCHIVE_SCALE decisions (default
// 20,000) on aggregates of ESJET_ARCHIVE_PER decisions each (default 5;
// ~560 bytes of event data each), 90% of them closed; EVENTS' size, a
// full reconcile and a view rebuild (a fresh projection catching up,
// ArchivedTombstone) before and after `archive run`, as ratios from the
// same run. Decisions issue no commands here (the settled check reads
// receipts only for commands): reconcile's cost is its walk of the log.
func BenchmarkArchiveAtScale(b *testing.B) {
	n, per := envInt("ESJET_ARCHIVE_SCALE", 20000), envInt("ESJET_ARCHIVE_PER", 5)
	for range b.N {
		b.StopTimer()
		measureArchive(b, n, per)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func measureArchive(t testing.TB, n, per int) {
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv)
	ns := natstest.Namespace(t)
	ctx := context.Background()
	if _, err := streams.Provision(ctx, js, ns, streams.ProvisionConfig{Archive: true}, nil); err != nil {
		t.Fatal(err)
	}
	log, err := streams.Open(ctx, js, ns, streams.Config{GroupCommit: streams.GroupCommit{MinBatch: 2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := archive.NewObjectStore(js, ns, 1, archive.CreateBucket)
	log.SetArchive(archive.Reader(store, log))
	aggs := n / per
	data := json.RawMessage(fmt.Sprintf(`{"note":%q}`, string(make([]byte, 0))+fmt.Sprintf("%0540d", 0)))
	began := time.Now()
	var wg sync.WaitGroup
	const writers = 64
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for a := w; a < aggs; a += writers {
				id := "a" + strconv.Itoa(a)
				pos := streams.Position{}
				for d := range per {
					typ := "updated"
					if d == per-1 && a%10 != 0 {
						typ = "closed" // 90% closed
					}
					rec, err := log.Append(ctx, streams.Decision{ID: uuid.Must(uuid.NewV7()).String(), AggregateType: "tally", AggregateID: id,
						Events: []streams.Event{{Type: typ, Data: data}}}, pos)
					if err != nil {
						errs <- err
						return
					}
					pos = rec.Position()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("wrote %d decisions on %d aggregates in %s", aggs*per, aggs, time.Since(began).Round(time.Millisecond))

	size := func() (uint64, uint64) {
		st, err := js.Stream(ctx, streams.NamesFor(ns).Events)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs, info.State.Bytes
	}
	reconcile := func() time.Duration {
		start := time.Now()
		rep, err := ops.NewReconciler(js, ns, ops.ReconcileConfig{Checkpoint: ops.CheckpointOff}, nil).Run(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Drift() != 0 {
			t.Fatalf("reconcile: drift %+v", rep.Totals)
		}
		return time.Since(start)
	}
	rebuild := func(name string) time.Duration {
		_, last := size()
		_ = last
		st, _ := js.Stream(ctx, streams.NamesFor(ns).Events)
		info, _ := st.Info(ctx)
		end := wire.EndOfSeq(info.State.LastSeq)
		noop := func(context.Context, *projection.Tx, projection.Event) error { return nil }
		def := projection.Definition{Name: name, Handle: noop, Archived: projection.ArchivedTombstone}
		start := time.Now()
		r, err := projection.NewRunner(ctx, js, log, []projection.Definition{def}, projection.Config{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { _ = r.Run(rctx); close(done) }()
		for caught := false; !caught; {
			for _, p := range r.Progress() {
				caught = caught || p.Position >= end
			}
			time.Sleep(2 * time.Millisecond)
		}
		took := time.Since(start)
		cancel()
		<-done
		return took
	}
	msgs0, bytes0 := size()
	rec0 := reconcile()
	view0 := rebuild("before")

	a := archive.New(js, log, store, func(context.Context, string, string, wire.Position) (json.RawMessage, int, int, error) {
		return json.RawMessage(fmt.Sprintf(`{"n":%d}`, per)), 1, 0, nil
	}, archive.Config{Rules: map[string]archive.Rule{"tally": {ClosedBy: []string{"closed"}}}}, nil)
	start := time.Now()
	p, err := a.Run(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	msgs1, bytes1 := size()
	rec1 := reconcile()
	view1 := rebuild("after")
	t.Logf("archive run: %d of %d aggregates archived (%d decisions, %d bytes) in %s (%.0f aggregates/s)",
		p.Archived, p.Total, p.Decisions, p.Bytes, took.Round(time.Millisecond), float64(p.Archived)/took.Seconds())
	t.Logf("EVENTS: %d msgs %d bytes → %d msgs %d bytes: %.1f%% smaller", msgs0, bytes0, msgs1, bytes1, 100*(1-float64(bytes1)/float64(bytes0)))
	t.Logf("full reconcile: %s → %s: %.1f× faster", rec0.Round(time.Millisecond), rec1.Round(time.Millisecond), rec0.Seconds()/rec1.Seconds())
	t.Logf("view rebuild (catch-up from zero, ArchivedTombstone): %s → %s: %.1f× faster", view0.Round(time.Millisecond), view1.Round(time.Millisecond), view0.Seconds()/view1.Seconds())
	if b, ok := t.(*testing.B); ok {
		b.ReportMetric(100*(1-float64(bytes1)/float64(bytes0)), "%smaller")
		b.ReportMetric(rec0.Seconds()/rec1.Seconds(), "x-reconcile")
		b.ReportMetric(view0.Seconds()/view1.Seconds(), "x-rebuild")
	}
}

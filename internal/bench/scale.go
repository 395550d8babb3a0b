package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/node"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// The scale phase (on demand: `esjet bench --phases scale --decisions N`):
// fill the store with N decisions through the Go API — one ~200-byte event
// each, 10 per aggregate spread over the whole log, every 4th one issuing
// a charge (the no-op worker runs it and reports charge_done, one more
// decision) — then measure what must not grow with the log: the store's
// bytes per decision and per command, a full and a repeat reconcile, the
// lookup of the oldest command, cold loads of random aggregates with the
// cache off, and the process's memory through all of it (client and
// server share the process: RSS is both).

// DefaultScaleDecisions is the scale phase's fill when --decisions is 0.
const DefaultScaleDecisions = 100_000

const (
	scaleEventsPerAggregate = 10
	scaleCommandEvery       = 4
	scaleColdLoads          = 1000
	scaleRepeatDecisions    = 10_000
)

// scaleNote pads the event payload to ~200 bytes.
var scaleNote = strings.Repeat("n", 180)

// Scale is the scale phase's figures.
type Scale struct {
	Decisions  int     `json:"decisions"`  // filled through the API (outcomes not counted)
	Aggregates int     `json:"aggregates"` // they were spread over
	Commands   int     `json:"commands"`   // issued (one per 4th decision)
	FillSecs   float64 `json:"fill_seconds"`
	// Messages and bytes as the streams report them after the fill (and
	// the relay and workers caught up).
	EventsMsgs  uint64 `json:"events_msgs"`
	EventsBytes uint64 `json:"events_bytes"`
	OutboxMsgs  uint64 `json:"outbox_msgs"`
	OutboxBytes uint64 `json:"outbox_bytes"`
	StoreBytes  int64  `json:"store_bytes"` // the data directory on disk (embedded only)
	// BytesPerDecision = EventsBytes / EventsMsgs; BytesPerCommand =
	// OutboxBytes / OutboxMsgs.
	BytesPerDecision float64 `json:"bytes_per_decision"`
	BytesPerCommand  float64 `json:"bytes_per_command"`
	// Reconcile: a full run, then a run after scaleRepeatDecisions more
	// decisions; RSS is the process's peak during each.
	ReconcileSecs       float64 `json:"reconcile_seconds"`
	ReconcileMsgsPerSec float64 `json:"reconcile_msgs_per_sec"`
	ReconcileRSS        int64   `json:"reconcile_peak_rss_bytes"`
	RepeatSecs          float64 `json:"reconcile_repeat_seconds"`
	RepeatRSS           int64   `json:"reconcile_repeat_peak_rss_bytes"`
	ReconcileDrift      uint64  `json:"reconcile_drift"` // orphans + duplicates + stuck + late effects: 0 expected
	// ReconcileHeld is the most commands the full run held in memory at
	// once (it reads in chunks; all of them before issue 18).
	ReconcileHeld int `json:"reconcile_peak_held_commands"`
	// OutboxOldestSecs is `esjet outbox <oldest command id>`, and
	// OutboxOldestReads the OUTBOX messages it read (direct gets and the
	// scan to the copy); the same for the command halfway through OUTBOX.
	// The time includes loading the issuing aggregate's history from
	// EVENTS; the reads must not grow with OUTBOX.
	OutboxOldestSecs  float64 `json:"outbox_oldest_seconds"`
	OutboxOldestReads int64   `json:"outbox_oldest_reads"`
	OutboxMiddleSecs  float64 `json:"outbox_middle_seconds"`
	OutboxMiddleReads int64   `json:"outbox_middle_reads"`
	// Cold loads of random aggregates, the cache off.
	ColdP50MS float64 `json:"cold_load_p50_ms"`
	ColdP99MS float64 `json:"cold_load_p99_ms"`
	// RSS before the cold loads and after them (each after a forced GC),
	// and the peak while they ran (what the node really held: the server
	// leaves decompressed blocks behind for the collector; memory.limit
	// bounds it).
	RSSBefore   int64 `json:"rss_before_cold_loads_bytes"`
	RSSAfter    int64 `json:"rss_after_cold_loads_bytes"`
	ColdPeakRSS int64 `json:"cold_loads_peak_rss_bytes"`
	// Cold reads of random aggregates' histories, as GET
	// /v1/raw/<type>/<id>/events serves them (the first page: every event
	// of this fill's aggregates, one EVENTS message each), after the cold
	// loads; the process's peak RSS and the collections meanwhile.
	HistoryP50MS   float64 `json:"history_read_p50_ms"`
	HistoryP99MS   float64 `json:"history_read_p99_ms"`
	HistoryPeakRSS int64   `json:"history_reads_peak_rss_bytes"`
	HistoryGCs     uint32  `json:"history_reads_gcs"`
	// MemoryLimit is the process's soft memory limit when the reads began
	// and when they ended (math.MaxInt64: none; memory.limit's governor
	// raises it above the budget when live data outgrows it), and
	// HistoryLiveHeap the live heap as of the last collection then.
	MemoryLimit      int64 `json:"memory_limit_bytes"`
	MemoryLimitAfter int64 `json:"memory_limit_after_bytes"`
	HistoryLiveHeap  int64 `json:"history_reads_live_heap_bytes"`
}

func (e *env) scalePhase(ctx context.Context, progress func(float64)) ([]Phase, error) {
	n := e.opts.Decisions
	if n <= 0 {
		n = DefaultScaleDecisions
	}
	aggs := max(n/scaleEventsPerAggregate, 1)
	sc := &Scale{Decisions: n, Aggregates: aggs}
	e.scale = sc // what was measured stays in the report if a later step fails
	names := streams.NamesFor(e.ns)
	body := func(i int) []byte {
		return []byte(`{"amount":` + strconv.Itoa(i%1000) + `,"note":"` + scaleNote + `"}`)
	}
	// Decision i goes to aggregate i mod aggs: an aggregate's 10 events lie
	// far apart in the log, as a long-lived service's do.
	send := func(ctx context.Context, i int) error {
		kind := "deposit"
		if i%scaleCommandEvery == scaleCommandEvery-1 {
			kind = "pay"
		}
		_, err := e.node.API().Send(ctx, "acct", "s"+strconv.Itoa(i%aggs), kind, body(i), api.Meta{})
		return err
	}
	sc.Commands = n / scaleCommandEvery
	filled, err := e.filledBefore(ctx, names, uint64(n+sc.Commands))
	if err != nil {
		return nil, err
	}
	if !filled {
		var done atomic.Int64
		stop := ticker(progress, func() float64 { return 0.8 * float64(done.Load()) / float64(n) })
		start := time.Now()
		res := RunOps(ctx, Spec{Workers: e.opts.Workers, Ops: n, Done: &done}, sweep(send))
		stop()
		if res.Errors > 0 {
			return nil, fmt.Errorf("fill: %d errors, the first: %w", res.Errors, res.FirstErr)
		}
		if err := e.settle(ctx, names, uint64(n+sc.Commands), uint64(sc.Commands)); err != nil {
			return nil, err
		}
		sc.FillSecs = time.Since(start).Seconds()
	}
	if err := e.scaleBytes(ctx, names, sc); err != nil {
		return nil, err
	}
	progress(0.85)

	full := ops.NewReconciler(e.nodeJS, e.ns, ops.ReconcileConfig{Checkpoint: ops.CheckpointFull}, nil)
	var rep ops.Report
	secs, rss, err := peakDuring(func() error {
		var err error
		rep, err = full.Run(ctx, nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	sc.ReconcileSecs, sc.ReconcileRSS = secs, rss
	if secs > 0 {
		sn := rep.Scanned
		sc.ReconcileMsgsPerSec = float64(sn.Events+sn.Outbox+sn.DLQ+sn.Receipts) / secs
	}
	t := rep.Totals
	sc.ReconcileDrift = t.Orphans + t.Duplicates + t.Stuck + t.LateEffects
	sc.ReconcileHeld = rep.Checkpoint.PeakHeld
	// A repeat run after scaleRepeatDecisions more decisions (deposits on
	// aggregates of their own).
	more := RunOps(ctx, Spec{Workers: e.opts.Workers, Ops: scaleRepeatDecisions}, sweep(func(ctx context.Context, i int) error {
		_, err := e.node.API().Send(ctx, "acct", "r"+strconv.Itoa(i%1000), "deposit", body(i), api.Meta{})
		return err
	}))
	if more.Errors > 0 {
		return nil, fmt.Errorf("repeat fill: %w", more.FirstErr)
	}
	rc := ops.NewReconciler(e.nodeJS, e.ns, ops.ReconcileConfig{}, nil)
	if sc.RepeatSecs, sc.RepeatRSS, err = peakDuring(func() error {
		_, err := rc.Run(ctx, nil)
		return err
	}); err != nil {
		return nil, fmt.Errorf("reconcile again: %w", err)
	}
	progress(0.9)

	oldest, middle, err := commandsToLookUp(ctx, e.nodeJS, names)
	if err != nil {
		return nil, err
	}
	if sc.OutboxOldestSecs, sc.OutboxOldestReads, err = lookUp(ctx, ops.Inspect(e.nodeJS, e.ns), oldest); err != nil {
		return nil, err
	}
	if sc.OutboxMiddleSecs, sc.OutboxMiddleReads, err = lookUp(ctx, ops.Inspect(e.nodeJS, e.ns), middle); err != nil {
		return nil, err
	}

	if err := e.coldLoads(ctx, names, sc); err != nil {
		return nil, err
	}
	progress(1)
	return nil, nil
}

// filledBefore says whether the log already holds want decisions: the
// fill of an earlier run on the same --data-dir, which this run reuses (its
// fill time stays 0).
func (e *env) filledBefore(ctx context.Context, names streams.Names, want uint64) (bool, error) {
	if e.opts.DataDir == "" {
		return false, nil
	}
	ev, err := e.nodeJS.Stream(ctx, names.Events)
	if err != nil {
		return false, err
	}
	if ev.CachedInfo().State.Msgs < want {
		return false, nil
	}
	ob, err := e.nodeJS.Stream(ctx, names.Outbox)
	if err != nil {
		return false, err
	}
	return true, e.settle(ctx, names, want, ob.CachedInfo().State.Msgs)
}

// settle waits until the log holds want decisions (the fill's and the
// outcomes'), OUTBOX has commands messages, and the relay acked them all.
func (e *env) settle(ctx context.Context, names streams.Names, want, commands uint64) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		ev, err := e.nodeJS.Stream(ctx, names.Events)
		if err != nil {
			return err
		}
		ob, err := e.nodeJS.Stream(ctx, names.Outbox)
		if err != nil {
			return err
		}
		cons, err := e.nodeJS.Consumer(ctx, names.Events, wire.RelayConsumerName)
		if err != nil {
			return err
		}
		es, obs := ev.CachedInfo().State, ob.CachedInfo().State
		if es.Msgs >= want && obs.Msgs >= commands && cons.CachedInfo().AckFloor.Stream >= es.LastSeq {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not settled after 10m: %d of %d decisions, %d of %d commands in OUTBOX, relay ack floor %d of %d",
				es.Msgs, want, obs.Msgs, commands, cons.CachedInfo().AckFloor.Stream, es.LastSeq)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (e *env) scaleBytes(ctx context.Context, names streams.Names, sc *Scale) error {
	for _, s := range []struct {
		name        string
		msgs, bytes *uint64
	}{{names.Events, &sc.EventsMsgs, &sc.EventsBytes}, {names.Outbox, &sc.OutboxMsgs, &sc.OutboxBytes}} {
		st, err := e.nodeJS.Stream(ctx, s.name)
		if err != nil {
			return err
		}
		*s.msgs, *s.bytes = st.CachedInfo().State.Msgs, st.CachedInfo().State.Bytes
	}
	if sc.EventsMsgs > 0 {
		sc.BytesPerDecision = float64(sc.EventsBytes) / float64(sc.EventsMsgs)
	}
	if sc.OutboxMsgs > 0 {
		sc.BytesPerCommand = float64(sc.OutboxBytes) / float64(sc.OutboxMsgs)
	}
	if dir := e.cfg.NATS.Embedded.DataDir; e.cfg.NATS.Mode == "embedded" && dir != "" {
		sc.StoreBytes = dirSize(dir)
	}
	return nil
}

// coldLoads loads scaleColdLoads random aggregates of the fill with a
// repository whose cache is off (snapshots as configured).
func (e *env) coldLoads(ctx context.Context, names streams.Names, sc *Scale) error {
	snaps, err := e.nodeJS.KeyValue(ctx, names.Snapshots)
	if err != nil {
		return err
	}
	reg, err := aggregate.NewRegistry(Account())
	if err != nil {
		return err
	}
	rc := node.RepositoryConfig(e.cfg) // snapshots as the node takes them
	rc.CacheSize = -1
	repo := aggregate.NewRepository(e.node.Log(), snaps, reg, rc, nil)
	sc.RSSBefore = settledRSS()
	var lat Recorder
	rng := rand.New(rand.NewPCG(1, 2))
	_, peak, err := peakDuring(func() error {
		for range scaleColdLoads {
			id := "s" + strconv.Itoa(rng.IntN(sc.Aggregates))
			t0 := time.Now()
			if _, err := repo.Get(ctx, "acct", id); err != nil {
				return fmt.Errorf("cold load acct/%s: %w", id, err)
			}
			lat.Add(time.Since(t0))
		}
		return nil
	})
	if err != nil {
		return err
	}
	sc.ColdPeakRSS = peak
	sc.ColdP50MS, sc.ColdP99MS = ms(lat.Percentile(50)), ms(lat.Percentile(99))
	sc.RSSAfter = settledRSS()
	if err := e.historyReads(ctx, sc); err != nil {
		return err
	}
	if e.opts.HeapProfile != "" {
		return writeHeapProfile(e.opts.HeapProfile)
	}
	return nil
}

// historyReads reads the first page of scaleColdLoads random aggregates'
// histories (what GET /v1/raw/<type>/<id>/events returns), other
// aggregates than coldLoads picked.
func (e *env) historyReads(ctx context.Context, sc *Scale) error {
	var lat Recorder
	rng := rand.New(rand.NewPCG(3, 4))
	sc.MemoryLimit = debug.SetMemoryLimit(-1)
	gcs := gcCount()
	var err error
	_, sc.HistoryPeakRSS, err = peakDuring(func() error {
		for range scaleColdLoads {
			id := "s" + strconv.Itoa(rng.IntN(sc.Aggregates))
			t0 := time.Now()
			pg, err := e.node.Log().LoadPage(ctx, "acct", id, 0, api.DefaultPageLimit)
			if err == nil && len(pg.Records) == 0 {
				err = fmt.Errorf("no events")
			}
			if err != nil {
				return fmt.Errorf("history of acct/%s: %w", id, err)
			}
			lat.Add(time.Since(t0))
		}
		return nil
	})
	sc.HistoryGCs = gcCount() - gcs
	sc.MemoryLimitAfter, sc.HistoryLiveHeap = debug.SetMemoryLimit(-1), liveHeap()
	sc.HistoryP50MS, sc.HistoryP99MS = ms(lat.Percentile(50)), ms(lat.Percentile(99))
	return err
}

// writeHeapProfile writes the process's heap profile (as of the last
// collection) to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--heapprofile: %w", err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return fmt.Errorf("--heapprofile %s: %w", path, err)
	}
	return f.Close()
}

// commandsToLookUp returns the ids of the first command in OUTBOX and of
// the one halfway through it.
func commandsToLookUp(ctx context.Context, js jetstream.JetStream, names streams.Names) (oldest, middle string, err error) {
	s := streams.NewScanner(js, names.Outbox, 1)
	defer s.Close()
	_, err = s.Scan(ctx, streams.ScanRange{Filter: names.OutboxFilter()}, func(m *jetstream.RawStreamMsg) error {
		oldest = m.Header.Get(wire.HeaderCommandID)
		return streams.ErrStopScan
	})
	if err == nil && oldest == "" {
		err = fmt.Errorf("no command in %s", names.Outbox)
	}
	if err != nil {
		return "", "", err
	}
	st, err := js.Stream(ctx, names.Outbox)
	if err != nil {
		return "", "", err
	}
	state := st.CachedInfo().State
	m, err := st.GetMsg(ctx, state.FirstSeq+(state.LastSeq-state.FirstSeq)/2)
	if err != nil {
		return "", "", fmt.Errorf("the command halfway through %s: %w", names.Outbox, err)
	}
	return oldest, m.Header.Get(wire.HeaderCommandID), nil
}

// lookUp times `esjet outbox <id>` and counts the OUTBOX messages it read.
func lookUp(ctx context.Context, in *ops.Inspector, id string) (secs float64, reads int64, err error) {
	t0 := time.Now()
	if _, err := in.Command(ctx, id); err != nil {
		return 0, 0, fmt.Errorf("outbox %s: %w", id, err)
	}
	return time.Since(t0).Seconds(), in.OutboxReads(), nil
}

// limitString shows a soft memory limit in MiB, or "none".
func limitString(l int64) string {
	if l == math.MaxInt64 || l <= 0 {
		return "none"
	}
	return strconv.FormatInt(l>>20, 10) + " MiB"
}

func dirSize(dir string) int64 {
	var total int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			total += fi.Size()
		}
		return nil
	})
	return total
}

// write prints the figures as the scale table of docs/PERFORMANCE.md shows them.
func (s *Scale) write(b *strings.Builder) {
	mb := func(v int64) string { return strconv.FormatFloat(float64(v)/1e6, 'f', 0, 64) + " MB" }
	fill := dur(s.FillSecs * 1000)
	if s.FillSecs == 0 {
		fill = "reused (--data-dir held the fill)"
	}
	rows := [][2]string{
		{"decisions / aggregates", fmt.Sprintf("%s / %s (+%s outcomes)", rate(float64(s.Decisions)), rate(float64(s.Aggregates)), rate(float64(s.Commands)))},
		{"fill (API, relay, workers)", fill},
		{"store on disk", mb(s.StoreBytes)},
		{"EVENTS bytes per decision", strconv.FormatFloat(s.BytesPerDecision, 'f', 0, 64)},
		{"OUTBOX bytes per command", strconv.FormatFloat(s.BytesPerCommand, 'f', 0, 64)},
		{"reconcile (full)", fmt.Sprintf("%s, %s msgs/s, peak RSS %s, drift %d, held %s commands at most", dur(s.ReconcileSecs*1000), rate(s.ReconcileMsgsPerSec), mb(s.ReconcileRSS), s.ReconcileDrift, rate(float64(s.ReconcileHeld)))},
		{"reconcile after 10k more", fmt.Sprintf("%s, peak RSS %s", dur(s.RepeatSecs*1000), mb(s.RepeatRSS))},
		{"esjet outbox <oldest id>", fmt.Sprintf("%s (%d OUTBOX messages read)", dur(s.OutboxOldestSecs*1000), s.OutboxOldestReads)},
		{"esjet outbox <id halfway>", fmt.Sprintf("%s (%d OUTBOX messages read)", dur(s.OutboxMiddleSecs*1000), s.OutboxMiddleReads)},
		{"cold load p50 / p99 (cache off)", dur(s.ColdP50MS) + " / " + dur(s.ColdP99MS)},
		{"RSS before / after 1,000 cold loads", mb(s.RSSBefore) + " / " + mb(s.RSSAfter) + ", peak " + mb(s.ColdPeakRSS) + " during them"},
		{"history reads p50 / p99 (raw events)", fmt.Sprintf("%s / %s, peak RSS %s, %d GCs, memory limit %s", dur(s.HistoryP50MS), dur(s.HistoryP99MS), mb(s.HistoryPeakRSS), s.HistoryGCs, limitString(s.MemoryLimit))},
		{"after the history reads", fmt.Sprintf("live heap %s, memory limit %s", mb(s.HistoryLiveHeap), limitString(s.MemoryLimitAfter))},
	}
	b.WriteString("SCALE\n")
	for _, r := range rows {
		fmt.Fprintf(b, "  %-36s %s\n", r[0], r[1])
	}
}

package esjet

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/bench/raw"
)

// Command benchmarks: commands/s through the Go API and through NATS micro
// across 1,000 aggregates, beside raw JetStream appends of the same messages
// (same size, same per-subject expectation, same concurrency) measured in
// the same run, interleaved round by round so they share the machine's noise.
//
//	go test -run '^$' -bench Commands -benchtime 5x .
//
// The Go API runs on the node's in-process connection, so its raw pair
// ("raw") publishes on that same connection; NATS micro clients come over
// TCP, so its pair ("raw-tcp") publishes from a TCP client.

const (
	benchAggregates = 1000
	benchWorkers    = 32
	benchRound      = 2000 // operations per mode per round
)

type benchEnv struct {
	node   *Node
	nc     *nats.Conn          // a TCP client
	js     jetstream.JetStream // on nc
	nodeJS jetstream.JetStream // the node's own in-process connection
	msg    *nats.Msg           // a real decision message, republished by the raw modes
}

type benchCount struct{ N int }

type benchAdd struct {
	By int `json:"by"`
}

func benchCounter() *Definition {
	def := Define("counter", 1, func(s benchCount, e Event) benchCount {
		var a benchAdd
		_ = e.Decode(&a)
		s.N += a.By
		return s
	})
	On(def, "add", func(s benchCount, c benchAdd) (Decision, error) { return Emit("added", c), nil })
	return def.Definition()
}

// startNode starts a benchmark node (namespace "test", sync interval, no
// HTTP, no demo, an aggregate cache of cacheSize: 0 is off) with opts'
// aggregates and handlers, and connects a TCP client to it; both are
// closed when b ends.
func startNode(b *testing.B, cacheSize int, opts Options) (*Node, *nats.Conn) {
	b.Helper()
	cfg := DefaultConfig()
	cfg.Aggregates.CacheSize = cacheSize
	cfg.Namespace = "test"
	cfg.NATS.Embedded.DataDir = b.TempDir()
	cfg.NATS.Embedded.Listen = "127.0.0.1:0"
	cfg.NATS.Embedded.Sync = config.SyncInterval
	cfg.HTTP.Listen = "none"
	cfg.Demo.Services = false
	opts.Config = cfg
	n, err := Start(context.Background(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = n.Close(context.Background()) })
	nc, err := nats.Connect(n.NATSURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	return n, nc
}

func startBenchNode(b *testing.B, cacheSize int) *benchEnv {
	b.Helper()
	n, nc := startNode(b, cacheSize, Options{Aggregates: []*Definition{benchCounter()}})
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	res, err := n.Send(ctx, "counter", "sample", "add", benchAdd{By: 1})
	if err != nil {
		b.Fatal(err)
	}
	st, err := js.Stream(ctx, "TEST_EVENTS")
	if err != nil {
		b.Fatal(err)
	}
	raw, err := st.GetMsg(ctx, res.Seq)
	if err != nil {
		b.Fatal(err)
	}
	msg := nats.NewMsg("")
	msg.Data = raw.Data
	for k, v := range raw.Header {
		msg.Header[k] = v
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "BENCH_RAW", Subjects: []string{"benchraw.>"}, Storage: jetstream.FileStorage,
		Duplicates: 2 * time.Minute, AllowDirect: true,
	}); err != nil {
		b.Fatal(err)
	}
	return &benchEnv{node: n, nc: nc, js: js, nodeJS: n.n.JetStream(), msg: msg}
}

// mode runs one operation for worker w on aggregate a.
type mode struct {
	name string
	op   func(ctx context.Context, w, a int) error
}

func (e *benchEnv) modes() []mode {
	return []mode{
		{"goapi", func(ctx context.Context, w, a int) error {
			_, err := e.node.Send(ctx, "counter", fmt.Sprintf("c%d", a), "add", benchAdd{By: 1})
			return err
		}},
		{"micro", func(ctx context.Context, w, a int) error {
			reply, err := e.nc.RequestWithContext(ctx, fmt.Sprintf("esjet.test.counter.c%d.add", a), []byte(`{"by":1}`))
			if err == nil && reply.Header.Get("Nats-Service-Error-Code") != "" {
				err = fmt.Errorf("%s %s", reply.Header.Get("Nats-Service-Error-Code"), reply.Header.Get("Nats-Service-Error"))
			}
			return err
		}},
		e.rawMode("raw", e.nodeJS, "benchraw.inproc"),
		e.rawMode("raw-tcp", e.js, "benchraw.tcp"),
	}
}

// rawMode appends the sample decision message with the same per-subject
// expectation an append carries, one subject per aggregate (raw.Appender,
// the floor `esjet bench` measures against too).
func (e *benchEnv) rawMode(name string, js jetstream.JetStream, prefix string) mode {
	subjects := make([]string, benchAggregates)
	for a := range subjects {
		subjects[a] = fmt.Sprintf("%s.c%d", prefix, a)
	}
	ap := raw.NewAppender(subjects, e.msg.Data, e.msg.Header)
	return mode{name, func(ctx context.Context, w, a int) error {
		_, err := ap.Append(ctx, js, a)
		return err
	}}
}

// round runs n operations of one mode over benchWorkers goroutines, each
// owning the aggregates a ≡ w (mod benchWorkers), and returns the elapsed
// time and every latency.
func round(ctx context.Context, m mode, n int, next []int) (time.Duration, []time.Duration, error) {
	lat := make([][]time.Duration, benchWorkers)
	errs := make([]error, benchWorkers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range benchWorkers {
		wg.Go(func() {
			for i := w; i < n; i += benchWorkers {
				a := w + benchWorkers*(next[w]%(benchAggregates/benchWorkers))
				next[w]++
				t0 := time.Now()
				if err := m.op(ctx, w, a); err != nil {
					errs[w] = fmt.Errorf("%s on aggregate %d: %w", m.name, a, err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for w := range benchWorkers {
		if errs[w] != nil {
			return 0, nil, errs[w]
		}
		all = append(all, lat[w]...)
	}
	return elapsed, all, nil
}

func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return float64(sorted[i]) / float64(time.Millisecond)
}

// BenchmarkCommands reports, per mode, commands/s and p50/p99 latency (ms),
// and the ratios goapi/raw and micro/raw. One b.N iteration = one
// interleaved round of benchRound operations per mode.
func BenchmarkCommands(b *testing.B) {
	e := startBenchNode(b, 10_000)
	ctx := context.Background()
	modes := e.modes()
	next := map[string][]int{}
	for _, m := range modes {
		next[m.name] = make([]int, benchWorkers)
		// Warm up: every aggregate exists and is cached before timing.
		if _, _, err := round(ctx, m, benchAggregates, next[m.name]); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := map[string]time.Duration{}
	lats := map[string][]time.Duration{}
	ops := 0
	for i := 0; b.Loop(); i++ {
		for j := range modes {
			m := modes[(i+j)%len(modes)] // which mode goes first rotates, as in raw.Pair
			d, l, err := round(ctx, m, benchRound, next[m.name])
			if err != nil {
				b.Fatal(err)
			}
			elapsed[m.name] += d
			lats[m.name] = append(lats[m.name], l...)
		}
		ops += benchRound
	}
	rate := map[string]float64{}
	for _, m := range modes {
		rate[m.name] = float64(ops) / elapsed[m.name].Seconds()
		l := lats[m.name]
		slices.Sort(l)
		b.ReportMetric(rate[m.name], m.name+"-cmd/s")
		b.ReportMetric(percentile(l, 0.50), m.name+"-p50-ms")
		b.ReportMetric(percentile(l, 0.99), m.name+"-p99-ms")
	}
	b.ReportMetric(rate["goapi"]/rate["raw"], "goapi/raw")
	b.ReportMetric(rate["micro"]/rate["raw-tcp"], "micro/raw-tcp")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkCommandLatencyWarm is one client sending commands one after
// another to cached aggregates: the latency a caller sees without queueing.
func BenchmarkCommandLatencyWarm(b *testing.B) {
	e := startBenchNode(b, 10_000)
	ctx := context.Background()
	for a := range 100 {
		if _, err := e.node.Send(ctx, "counter", fmt.Sprintf("w%d", a), "add", benchAdd{By: 1}); err != nil {
			b.Fatal(err)
		}
	}
	var lat []time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		if _, err := e.node.Send(ctx, "counter", fmt.Sprintf("w%d", i%100), "add", benchAdd{By: 1}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		i++
	}
	slices.Sort(lat)
	b.ReportMetric(percentile(lat, 0.50), "p50-ms")
	b.ReportMetric(percentile(lat, 0.99), "p99-ms")
}

// BenchmarkLoadColdVsWarm compares reading an aggregate of 250 events
// (snapshot every 100) from the cache plus a tail check (warm) with a cold
// load: snapshot + tail (the cache is off).
func BenchmarkLoadColdVsWarm(b *testing.B) {
	for _, c := range []struct {
		name  string
		cache int
	}{{"warm", 10_000}, {"cold", 0}} {
		b.Run(c.name, func(b *testing.B) {
			e := startBenchNode(b, c.cache)
			ctx := context.Background()
			for range 250 {
				if _, err := e.node.Send(ctx, "counter", "big", "add", benchAdd{By: 1}); err != nil {
					b.Fatal(err)
				}
			}
			var lat []time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, _, err := e.node.State(ctx, "counter", "big"); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			b.ReportMetric(percentile(lat, 0.50), "p50-ms")
			b.ReportMetric(percentile(lat, 0.99), "p99-ms")
		})
	}
}

type benchAcct struct{ Charged int }

func benchAccount() *Definition {
	def := Define("acct", 1, func(s benchAcct, e Event) benchAcct {
		if e.Type == "charged" {
			s.Charged++
		}
		return s
	})
	On(def, "pay", func(s benchAcct, c benchAdd) (Decision, error) {
		return Emit("payment_requested", c).Issue("charge", c), nil
	})
	On(def, "charge_done", func(s benchAcct, o Outcome) (Decision, error) {
		return Emit("charged", o), nil
	})
	On(def, "charge_failed", func(s benchAcct, o Outcome) (Decision, error) {
		return Emit("charge_failed", o), nil
	})
	return def.Definition()
}

// BenchmarkEndToEnd is the whole loop, one command at a time: Send(pay) →
// decision (issues charge) → relay → OUTBOX → worker runs a no-op Go
// handler → receipt → charge_done back to the aggregate → "charged" is in
// the log. It reports p50/p99 of that time.
func BenchmarkEndToEnd(b *testing.B) {
	n, nc := startNode(b, DefaultConfig().Aggregates.CacheSize, Options{Aggregates: []*Definition{benchAccount()},
		Handlers: map[string]Handler{"charge": HandlerFunc(func(context.Context, Delivery) (json.RawMessage, error) { return nil, nil })}})
	charged := make(chan string, 16)
	sub, err := nc.Subscribe("test.evt.acct.*", func(m *nats.Msg) {
		if m.Header.Get("Esjet-Event-Types") == "charged" {
			charged <- m.Header.Get("Esjet-Aggregate-Id")
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	ctx := context.Background()
	var lat []time.Duration
	i := 0
	for b.Loop() {
		id := fmt.Sprintf("a%d", i)
		t0 := time.Now()
		if _, err := n.Send(ctx, "acct", id, "pay", benchAdd{By: 1}); err != nil {
			b.Fatal(err)
		}
		select {
		case got := <-charged:
			if got != id {
				b.Fatalf("charged %s, want %s", got, id)
			}
		case <-time.After(10 * time.Second):
			b.Fatalf("%s never charged", id)
		}
		lat = append(lat, time.Since(t0))
		i++
	}
	slices.Sort(lat)
	b.ReportMetric(percentile(lat, 0.50), "p50-ms")
	b.ReportMetric(percentile(lat, 0.99), "p99-ms")
}

package streams

// Benchmarks of the hot paths against raw JetStream doing the same work in the
// same run: absolute numbers on a shared 2-core machine drift, the ratio is
// the figure to watch.
//
//	go test -run '^$' -bench . -benchtime 2s -count 3 ./internal/streams/
//
// "raw" publishes a message of the same size as esjet's (headers + data) on
// the same kind of subject and stream, with the same Nats-Msg-Id and
// expected-last-subject-sequence guard, and reads with the same batched direct
// get, without decoding. The server runs in the test process (over loopback
// TCP), so allocs/op include the server's allocations for both.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/bench/raw"
	"github.com/esjet/esjet/internal/natstest"
)

const (
	benchAggregates = 1000 // aggregates in the concurrent cases
	benchGoroutines = 64   // writers in the concurrent cases, each owning aggregates g, g+64, …
	benchRound      = 500  // serial appends per esjet or raw round in the paired benchmarks
)

// benchEventData is one event's JSON data: 200 bytes.
var benchEventData = func() json.RawMessage {
	d := `{"trip_id":"7f0c1e9a","from":"AMS","to":"LIS","passengers":2,"fare":{"amount":18950,"currency":"EUR"},"notes":""}`
	return json.RawMessage(strings.Replace(d, `"notes":""`, `"notes":"`+strings.Repeat("n", 200-len(d))+`"`, 1))
}()

// benchNS is one provisioned namespace on a benchmark server.
type benchNS struct {
	js    jetstream.JetStream
	log   *Log
	names Names
}

func newBenchNS(b *testing.B, s *server.Server) *benchNS {
	b.Helper()
	_, js := natstest.Connect(b, s)
	ns := natstest.Namespace(b)
	if _, err := Provision(b.Context(), js, ns, ProvisionConfig{}, nil); err != nil {
		b.Fatal(err)
	}
	l, err := Open(b.Context(), js, ns, Config{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return &benchNS{js: js, log: l, names: l.Names()}
}

func benchDecision(id string) Decision {
	return Decision{
		ID:            uuid.Must(uuid.NewV7()).String(),
		AggregateType: "trip",
		AggregateID:   id,
		Events:        []Event{{Type: "trip_requested", Data: benchEventData}},
	}
}

// rawData is a payload that makes a raw message (Msg-Id header + data) as
// big as esjet's encoded decision, expectation header aside (both send it).
func rawData(b *testing.B, subject string) []byte {
	b.Helper()
	p, err := prepare(benchDecision("a0"), Position{}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	m, err := encode(subject, p)
	if err != nil {
		b.Fatal(err)
	}
	want := msgSize(m)
	raw := nats.NewMsg(subject)
	raw.Header.Set(jetstream.MsgIDHeader, p.ID)
	raw.Data = []byte(`{"pad":""}`)
	pad := want - msgSize(raw)
	if pad < 0 {
		b.Fatalf("esjet message %d bytes is smaller than the bare raw one", want)
	}
	raw.Data = []byte(`{"pad":"` + strings.Repeat("p", pad) + `"}`)
	if msgSize(raw) != want {
		b.Fatalf("raw message %d bytes, esjet %d", msgSize(raw), want)
	}
	return raw.Data
}

// appender appends one decision to aggregate a and remembers its position.
// Each aggregate is used by one goroutine at a time.
type appender interface {
	append(ctx context.Context, a int) error
}

type esjetAppender struct {
	log *Log
	ids []string
	pos []Position
}

func newEsjetAppender(ns *benchNS, aggregates int) *esjetAppender {
	e := &esjetAppender{log: ns.log, ids: make([]string, aggregates), pos: make([]Position, aggregates)}
	for a := range aggregates {
		e.ids[a] = "a" + strconv.Itoa(a)
	}
	return e
}

func (e *esjetAppender) append(ctx context.Context, a int) error {
	rec, err := e.log.Append(ctx, benchDecision(e.ids[a]), e.pos[a])
	if err != nil {
		return err
	}
	e.pos[a] = rec.Position()
	return nil
}

// rawAppender is the raw pair of esjetAppender: raw.Appender publishing a
// message as big as esjet's to one subject per aggregate.
type rawAppender struct {
	js jetstream.JetStream
	ap *raw.Appender
}

func newRawAppender(b *testing.B, ns *benchNS, aggregates int) *rawAppender {
	subjects := make([]string, aggregates)
	for a := range aggregates {
		subjects[a] = ns.names.Namespace + ".evt.trip.a" + strconv.Itoa(a)
	}
	return &rawAppender{js: ns.js, ap: raw.NewAppender(subjects, rawData(b, subjects[0]), nil)}
}

func (r *rawAppender) append(ctx context.Context, a int) error {
	_, err := r.ap.Append(ctx, r.js, a)
	return err
}

func benchSerial(b *testing.B, ap appender) {
	b.ReportAllocs()
	ctx := b.Context()
	n := 0
	for b.Loop() {
		if err := ap.append(ctx, 0); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}

// benchConcurrent runs about benchGoroutines writers (RunParallel starts a
// multiple of GOMAXPROCS); writer g of w appends to its aggregates g, g+w, …
// in turn, so no two writers share an aggregate.
func benchConcurrent(b *testing.B, ap appender) {
	b.ReportAllocs()
	ctx := b.Context()
	procs := runtime.GOMAXPROCS(0)
	parallelism := (benchGoroutines + procs - 1) / procs
	writers := parallelism * procs
	b.SetParallelism(parallelism)
	var gid atomic.Int64
	next := make([]int, writers) // per writer: its next aggregate
	b.RunParallel(func(pb *testing.PB) {
		g := int(gid.Add(1) - 1)
		next[g] = g
		for pb.Next() {
			a := next[g]
			if next[g] += writers; next[g] >= benchAggregates {
				next[g] = g
			}
			if err := ap.append(ctx, a); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkAppend measures Log.Append against a raw conditional publish of the
// same size: one aggregate from one goroutine, 1,000 aggregates from 64, and
// one aggregate on a server that fsyncs every write.
func BenchmarkAppend(b *testing.B) {
	s := natstest.RunServer(b)
	run := func(name string, s *server.Server, aggregates int, bench func(*testing.B, appender)) {
		esjetNS, rawNS := newBenchNS(b, s), newBenchNS(b, s)
		es, raw := newEsjetAppender(esjetNS, aggregates), newRawAppender(b, rawNS, aggregates)
		b.Run(name+"/esjet", func(b *testing.B) { bench(b, es) })
		b.Run(name+"/raw", func(b *testing.B) { bench(b, raw) })
	}
	run("serial-1-aggregate", s, 1, benchSerial)
	run("concurrent-1000-aggregates", s, benchAggregates, benchConcurrent)
	run("sync-always/serial-1-aggregate", natstest.RunServer(b, natstest.SyncAlways()), 1, benchSerial)
}

// pairedAppend runs equal rounds of esjet and raw appends (raw.Pair: which
// goes first alternates) so both share the machine's noise, and reports
// each throughput and their ratio.
func pairedAppend(b *testing.B, rounds int, esRound, rawRound func(context.Context) error) {
	b.ReportAllocs()
	ctx := b.Context()
	var p raw.Pair
	for b.Loop() {
		err := p.Round(rounds, raw.Timed(func() error { return esRound(ctx) }), raw.Timed(func() error { return rawRound(ctx) }))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(p.Esjet.PerSecond(), "esjet-events/s")
	b.ReportMetric(p.Raw.PerSecond(), "raw-events/s")
	b.ReportMetric(p.Ratio(), "ratio")
}

// serialRound makes n appends to aggregate 0.
func serialRound(ap appender, n int) func(context.Context) error {
	return func(ctx context.Context) error {
		for range n {
			if err := ap.append(ctx, 0); err != nil {
				return err
			}
		}
		return nil
	}
}

// concurrentRound makes n appends with benchGoroutines writers taking
// tickets from one counter; writer g walks its own aggregates g, g+64, …
// across rounds, so writers never share an aggregate.
func concurrentRound(ap appender, n int) func(context.Context) error {
	next := make([]int, benchGoroutines)
	for g := range next {
		next[g] = g
	}
	return func(ctx context.Context) error {
		var tickets atomic.Int64
		var wg sync.WaitGroup
		errs := make([]error, benchGoroutines)
		for g := range benchGoroutines {
			wg.Go(func() {
				for tickets.Add(1) <= int64(n) {
					a := next[g]
					if next[g] += benchGoroutines; next[g] >= benchAggregates {
						next[g] = g
					}
					if err := ap.append(ctx, a); err != nil {
						errs[g] = err
						return
					}
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	}
}

// BenchmarkAppendRatio reports esjet/raw append throughput from interleaved
// rounds in one benchmark body (target ≥ 0.85 with sync interval).
func BenchmarkAppendRatio(b *testing.B) {
	s := natstest.RunServer(b)
	b.Run("serial-1-aggregate", func(b *testing.B) {
		es, raw := newEsjetAppender(newBenchNS(b, s), 1), newRawAppender(b, newBenchNS(b, s), 1)
		pairedAppend(b, benchRound, serialRound(es, benchRound), serialRound(raw, benchRound))
	})
	b.Run("concurrent-1000-aggregates", func(b *testing.B) {
		es := newEsjetAppender(newBenchNS(b, s), benchAggregates)
		raw := newRawAppender(b, newBenchNS(b, s), benchAggregates)
		const n = 2 * benchAggregates
		pairedAppend(b, n, concurrentRound(es, n), concurrentRound(raw, n))
	})
	b.Run("sync-always/serial-1-aggregate", func(b *testing.B) {
		s := natstest.RunServer(b, natstest.SyncAlways())
		es, raw := newEsjetAppender(newBenchNS(b, s), 1), newRawAppender(b, newBenchNS(b, s), 1)
		const n = 100
		pairedAppend(b, n, serialRound(es, n), serialRound(raw, n))
	})
}

// loadFixture is an aggregate with n decisions in a stream where three other
// aggregates' decisions are interleaved with each of its own.
type loadFixture struct {
	ns      *benchNS
	n       int
	subject string
	raw     *Scanner
}

func newLoadFixture(b *testing.B, s *server.Server, n int) *loadFixture {
	b.Helper()
	ns := newBenchNS(b, s)
	ctx := b.Context()
	others := make([]Position, 50)
	var pos Position
	for i := range n {
		rec, err := ns.log.Append(ctx, benchDecision("target"), pos)
		if err != nil {
			b.Fatal(err)
		}
		pos = rec.Position()
		for j := range 3 {
			o := (3*i + j) % len(others)
			rec, err := ns.log.Append(ctx, benchDecision("other"+strconv.Itoa(o)), others[o])
			if err != nil {
				b.Fatal(err)
			}
			others[o] = rec.Position()
		}
	}
	subject, err := ns.names.AggregateSubject("trip", "target")
	if err != nil {
		b.Fatal(err)
	}
	sc := NewScanner(ns.js, ns.names.Events, ns.log.cfg.LoadBatch)
	b.Cleanup(func() { _ = sc.Close() })
	return &loadFixture{ns: ns, n: n, subject: subject, raw: sc}
}

func (f *loadFixture) esjetLoad(ctx context.Context) error {
	recs, err := f.ns.log.Load(ctx, "trip", "target", Position{})
	if err != nil {
		return err
	}
	if len(recs) != f.n {
		return fmt.Errorf("esjet loaded %d decisions, want %d", len(recs), f.n)
	}
	return nil
}

// rawLoad reads the aggregate the way Log.Load does — batched direct get on
// the subject, batch by batch, over one shared reply subscription (the
// Scanner `esjet bench` reads with too) — but only touches the bytes: the
// raw protocol cost, without decoding, checks or upcasting.
func (f *loadFixture) rawLoad(ctx context.Context) error {
	size := 0
	count, err := f.raw.Scan(ctx, ScanRange{Filter: f.subject}, func(m *jetstream.RawStreamMsg) error {
		size += len(m.Data)
		return nil
	})
	if err != nil {
		return err
	}
	if count != f.n || size == 0 {
		return fmt.Errorf("raw read %d messages, want %d", count, f.n)
	}
	return nil
}

var loadSizes = []int{10, 1000}

// BenchmarkLoad measures Log.Load of a whole aggregate against a raw batched
// direct get of the same messages.
func BenchmarkLoad(b *testing.B) {
	s := natstest.RunServer(b)
	for _, n := range loadSizes {
		f := newLoadFixture(b, s, n)
		for _, impl := range []struct {
			name string
			load func(context.Context) error
		}{{"esjet", f.esjetLoad}, {"raw", f.rawLoad}} {
			b.Run(fmt.Sprintf("decisions-%d/%s", n, impl.name), func(b *testing.B) {
				b.ReportAllocs()
				ctx := b.Context()
				loads := 0
				for b.Loop() {
					if err := impl.load(ctx); err != nil {
						b.Fatal(err)
					}
					loads++
				}
				b.ReportMetric(float64(loads*n)/b.Elapsed().Seconds(), "decisions/s")
			})
		}
	}
}

// BenchmarkLoadRatio alternates rounds of esjet and raw loads of the same
// aggregate and reports esjet_time/raw_time (target ≤ 1.2 for 1,000
// decisions).
func BenchmarkLoadRatio(b *testing.B) {
	s := natstest.RunServer(b)
	for _, n := range loadSizes {
		b.Run(fmt.Sprintf("decisions-%d", n), func(b *testing.B) {
			f := newLoadFixture(b, s, n)
			perRound := max(1, 2000/n)
			b.ReportAllocs()
			ctx := b.Context()
			loads := func(load func(context.Context) error) raw.Side {
				return raw.Timed(func() error {
					for range perRound {
						if err := load(ctx); err != nil {
							return err
						}
					}
					return nil
				})
			}
			var p raw.Pair
			for b.Loop() {
				if err := p.Round(perRound, loads(f.esjetLoad), loads(f.rawLoad)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(p.Esjet.Elapsed.Microseconds())/float64(p.Esjet.Ops), "esjet-µs/load")
			b.ReportMetric(float64(p.Raw.Elapsed.Microseconds())/float64(p.Raw.Ops), "raw-µs/load")
			b.ReportMetric(p.Esjet.Elapsed.Seconds()/p.Raw.Elapsed.Seconds(), "time-ratio")
		})
	}
}

// BenchmarkReplayRatio reads a whole log of 20,000 decisions (1,000
// aggregates) with Log.ReadFrom, decoding every decision, against an
// ordered consumer touching only the bytes (raw.Read, the replay phase's
// raw side), in alternating rounds, and reports esjet_time/raw_time.
func BenchmarkReplayRatio(b *testing.B) {
	s := natstest.RunServer(b)
	ns := newBenchNS(b, s)
	ctx := b.Context()
	const total = 20_000
	ap := newEsjetAppender(ns, benchAggregates)
	if err := concurrentRound(ap, total)(ctx); err != nil {
		b.Fatal(err)
	}
	st, err := ns.js.Stream(ctx, ns.names.Events)
	if err != nil {
		b.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	last := info.State.LastSeq
	b.ReportAllocs()
	var p raw.Pair
	for b.Loop() {
		err := p.Round(total, raw.Timed(func() error {
			recs, err := ns.log.ReadFrom(ctx, 1, 0)
			if err == nil && len(recs) != total {
				err = fmt.Errorf("read %d decisions, want %d", len(recs), total)
			}
			return err
		}), raw.Timed(func() error {
			n, err := raw.Read(ctx, ns.js, ns.names.Events, ns.names.EventsFilter(), last)
			if err == nil && n != total {
				err = fmt.Errorf("read %d messages, want %d", n, total)
			}
			return err
		}))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(p.Esjet.PerSecond(), "esjet-decisions/s")
	b.ReportMetric(p.Raw.PerSecond(), "raw-decisions/s")
	b.ReportMetric(p.Ratio(), "ratio")
}

// BenchmarkDecode is one decision of one 200-byte event decoded, as every
// read path decodes it.
func BenchmarkDecode(b *testing.B) {
	d := benchDecision("target")
	d.Events[0].Version = 1
	data, err := appendEnvelope(nil, d)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

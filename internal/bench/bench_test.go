package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPercentilesExact(t *testing.T) {
	var r Recorder
	for i := 100; i >= 1; i-- { // out of order on purpose
		r.Add(time.Duration(i) * time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {90, 90 * time.Millisecond}, {99, 99 * time.Millisecond}, {99.9, 100 * time.Millisecond}, {100, 100 * time.Millisecond}, {1, time.Millisecond}, {0.5, time.Millisecond}} {
		if got := r.Percentile(c.p); got != c.want {
			t.Errorf("p%g = %s, want %s", c.p, got, c.want)
		}
	}
	s := r.Summary()
	want := Summary{Samples: 100, MeanMS: 50.5, P50MS: 50, P90MS: 90, P99MS: 99, P999MS: 100, MaxMS: 100}
	if *s != want {
		t.Errorf("summary = %+v, want %+v", *s, want)
	}

	// Nearest rank on a small set: p50 of 3 samples is the 2nd.
	var small Recorder
	for _, d := range []time.Duration{5, 1, 3} {
		small.Add(d)
	}
	if got := small.Percentile(50); got != 3 {
		t.Errorf("p50 of {1,3,5} = %d, want 3", got)
	}
	if got := small.Percentile(99.9); got != 5 {
		t.Errorf("p99.9 of {1,3,5} = %d, want 5", got)
	}

	// Merge, and a sample added after a percentile was read.
	var a, b Recorder
	a.Add(10)
	b.Add(30)
	a.Merge(&b)
	_ = a.Percentile(50)
	a.Add(20)
	if got := a.Percentile(50); got != 20 {
		t.Errorf("p50 of {10,20,30} = %d, want 20", got)
	}
	var empty Recorder
	if empty.Percentile(50) != 0 || empty.Summary() != nil {
		t.Error("empty recorder: want 0 and a nil summary")
	}
}

func TestPickers(t *testing.T) {
	const n, picks = 10, 100_000
	u, err := NewPicker(SkewUniform, n, 7)
	if err != nil {
		t.Fatal(err)
	}
	counts := make([]int, n)
	for range picks {
		a := u.Pick()
		if a < 0 || a >= n {
			t.Fatalf("uniform picked %d, outside [0,%d)", a, n)
		}
		counts[a]++
	}
	for a, c := range counts {
		if math.Abs(float64(c)-picks/n) > 0.05*picks/n {
			t.Errorf("uniform: aggregate %d picked %d times, want about %d", a, c, picks/n)
		}
	}

	z, err := NewPicker(SkewZipf, 1000, 7)
	if err != nil {
		t.Fatal(err)
	}
	zc := make([]int, 1000)
	for range picks {
		a := z.Pick()
		if a < 0 || a >= 1000 {
			t.Fatalf("zipf picked %d, outside [0,1000)", a)
		}
		zc[a]++
	}
	// P(k) ∝ (k+1)^-s: the hottest aggregate gets 1/H of the picks.
	h := 0.0
	for k := range 1000 {
		h += math.Pow(float64(k+1), -ZipfS)
	}
	if got, want := float64(zc[0])/picks, 1/h; math.Abs(got-want) > 0.01 {
		t.Errorf("zipf: hottest share %.3f, want %.3f", got, want)
	}
	if !(zc[0] > zc[1] && zc[1] > zc[2] && zc[2] > zc[10] && zc[10] > zc[500]) {
		t.Errorf("zipf: counts not decreasing with rank: %d %d %d %d %d", zc[0], zc[1], zc[2], zc[10], zc[500])
	}

	// Seeded: the same seed gives the same sequence.
	p1, _ := NewPicker(SkewZipf, 1000, 42)
	p2, _ := NewPicker(SkewZipf, 1000, 42)
	for range 100 {
		if p1.Pick() != p2.Pick() {
			t.Fatal("same seed, different picks")
		}
	}
	if _, err := NewPicker("pareto", 10, 1); err == nil {
		t.Error("unknown skew accepted")
	}
	if _, err := NewPicker(SkewUniform, 0, 1); err == nil {
		t.Error("0 aggregates accepted")
	}
}

// fakeClock moves only when an operation advances it or a sleep waits.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) SleepUntil(_ context.Context, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func latencies(r *Result) []time.Duration {
	r.Latency.sort()
	return r.Latency.samples
}

func TestRateSchedulerMeasuresFromSchedule(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	op := func(context.Context, int) (bool, error) { clock.advance(5 * time.Millisecond); return false, nil }

	// 1,000/s (one due every 1 ms) against a server that takes 5 ms: each
	// operation starts later than due, and the wait counts.
	res := RunOps(t.Context(), Spec{Workers: 1, Ops: 4, Rate: 1000, Clock: clock}, op)
	want := []time.Duration{5 * time.Millisecond, 9 * time.Millisecond, 13 * time.Millisecond, 17 * time.Millisecond}
	if got := latencies(&res); !reflect.DeepEqual(got, want) {
		t.Errorf("fixed rate: latencies %v, want %v", got, want)
	}
	if res.Ops != 4 || res.Elapsed != 20*time.Millisecond {
		t.Errorf("fixed rate: ops %d elapsed %s, want 4 and 20ms", res.Ops, res.Elapsed)
	}

	// Closed loop: the same server shows 5 ms every time (the omission the
	// rate mode avoids).
	res = RunOps(t.Context(), Spec{Workers: 1, Ops: 4, Clock: clock}, op)
	if got := latencies(&res); !reflect.DeepEqual(got, []time.Duration{5e6, 5e6, 5e6, 5e6}) {
		t.Errorf("closed loop: latencies %v, want 4 × 5ms", got)
	}

	// A fast server at 100/s: each operation waits for its due time and
	// takes 1 ms; For stops issuing at 30 ms (due 0, 10, 20 ms).
	fast := func(context.Context, int) (bool, error) { clock.advance(time.Millisecond); return false, nil }
	start := clock.Now()
	res = RunOps(t.Context(), Spec{Workers: 1, For: 30 * time.Millisecond, Rate: 100, Clock: clock}, fast)
	if got := latencies(&res); !reflect.DeepEqual(got, []time.Duration{1e6, 1e6, 1e6}) {
		t.Errorf("under capacity: latencies %v, want 3 × 1ms", got)
	}
	if got := clock.Now().Sub(start); got != 21*time.Millisecond {
		t.Errorf("under capacity: ran %s, want 21ms", got)
	}
	if d := Due(start, 100, 3); d.Sub(start) != 30*time.Millisecond {
		t.Errorf("Due(3) at 100/s = +%s, want +30ms", d.Sub(start))
	}
}

func TestRunOpsCountsOutcomes(t *testing.T) {
	errConflict := errors.New("conflict")
	var mu sync.Mutex
	i := 0
	op := func(context.Context, int) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		i++
		switch i % 4 {
		case 0:
			return true, errConflict
		case 1:
			return false, errors.New("boom")
		}
		return false, nil
	}
	classify := func(err error) Outcome {
		if errors.Is(err, errConflict) {
			return Conflict
		}
		return Failed
	}
	res := RunOps(t.Context(), Spec{Workers: 4, Ops: 100, Classify: classify}, op)
	if res.Ops != 50 || res.Conflicts != 25 || res.Errors != 25 || res.Waits != 25 || res.Latency.Len() != 50 {
		t.Errorf("ops %d conflicts %d errors %d waits %d samples %d, want 50 25 25 25 50", res.Ops, res.Conflicts, res.Errors, res.Waits, res.Latency.Len())
	}
	if res.FirstErr == nil || res.FirstErr.Error() != "boom" {
		t.Errorf("first error %v, want boom", res.FirstErr)
	}
}

func TestPlanSplitsCounts(t *testing.T) {
	e := &env{opts: Options{Count: 203}}
	p := e.planFor(2)
	sum := 0
	for _, n := range p.ops {
		sum += n
	}
	if p.rounds != 4 || sum != 203 {
		t.Errorf("count plan: %d rounds summing to %d, want 4 and 203", p.rounds, sum)
	}
	e = &env{opts: Options{Duration: 4 * time.Second}}
	if p := e.planFor(2); p.rounds != 4 || p.slice != 500*time.Millisecond {
		t.Errorf("duration plan: %d rounds of %s, want 4 of 500ms", p.rounds, p.slice)
	}
}

func sampleReport() *Report {
	es := Result{Ops: 1000, Conflicts: 10, Elapsed: 100 * time.Millisecond}
	raw := Result{Ops: 1000, Elapsed: 50 * time.Millisecond}
	for i := 1; i <= 1000; i++ {
		es.Latency.Add(time.Duration(i) * time.Microsecond)
		raw.Latency.Add(time.Duration(i) * time.Microsecond / 2)
	}
	p := Phase{Name: PhaseAppend, Description: describe[PhaseAppend], Unit: "command"}
	p.pair(&es, &raw)
	e2e := Result{Ops: 50, Elapsed: time.Second}
	e2e.Latency.Add(12 * time.Millisecond)
	q := Phase{Name: PhaseE2E, Unit: "round trip"}
	q.pair(&e2e, nil)
	r := &Report{Version: "0.1.0", GoVersion: "go1.26", CPUs: 2, Started: "2026-01-01T00:00:00Z", Seconds: 3,
		Server: Server{Embedded: true, Sync: "interval", Replicas: 1, Namespace: "bench"},
		Params: Params{DurationSeconds: 4, Aggregates: 1000, Skew: SkewUniform, Workers: 32, Phases: []string{PhaseAppend, PhaseE2E}},
		Phases: []Phase{p, q}}
	r.Notes = notes(r, Options{Duration: 4 * time.Second, Aggregates: 1000, Skew: SkewUniform, Workers: 32})
	return r
}

func TestReportTable(t *testing.T) {
	r := sampleReport()
	p := r.Phases[0]
	if p.Esjet.OpsPerSec != 10_000 || p.Raw.OpsPerSec != 20_000 || p.Ratio != 0.5 || p.RatioOf != "throughput" {
		t.Fatalf("pair: %+v", p)
	}
	if math.Abs(p.ConflictRate-10.0/1010) > 1e-12 {
		t.Errorf("conflict rate %g, want 10/1010", p.ConflictRate)
	}
	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(buf.String(), "\n")
	want := []string{
		"PHASE   ESJET OPS/S  RAW OPS/S  RATIO     P50     P90     P99   P99.9  CONFLICTS  ERRORS",
		"append       10,000     20,000   0.50   500µs   900µs   990µs   999µs         10       0",
		"e2e            50.0          -      -  12.0ms  12.0ms  12.0ms  12.0ms          0       0",
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d:\n got %q\nwant %q", i, lines[i], w)
		}
	}
	// Every row has the same width: the columns line up.
	if len(lines) < 4 || len([]rune(lines[0])) != len([]rune(lines[1])) || len([]rune(lines[1])) != len([]rune(lines[2])) {
		t.Fatalf("rows not aligned:\n%s", buf.String())
	}
	if !strings.HasPrefix(lines[1], "append ") || !strings.HasPrefix(lines[2], "e2e ") {
		t.Errorf("phase names not left-aligned:\n%s", buf.String())
	}
	if !strings.Contains(buf.String(), "Sync interval") || !strings.Contains(buf.String(), "Noise:") {
		t.Errorf("notes missing:\n%s", buf.String())
	}
}

func TestReportJSONRoundTrip(t *testing.T) {
	r := sampleReport()
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*r, back) {
		t.Errorf("round trip differs:\n%+v\n%+v", *r, back)
	}
	// The field names are the stable contract.
	for _, k := range []string{`"phases"`, `"ratio": 0.5`, `"ratio_of": "throughput"`, `"ops_per_sec": 10000`, `"p99_9_ms"`, `"conflict_rate"`, `"sync": "interval"`} {
		if !strings.Contains(buf.String(), k) {
			t.Errorf("JSON lacks %s", k)
		}
	}
}

func TestSVGIsWellFormed(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleReport().WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(&buf)
	rects := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			rects++
		}
	}
	// Background + 4 bars × 2 phases + 4 legend swatches.
	if rects != 1+8+4 {
		t.Errorf("%d rects, want 13", rects)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{Skew: "pareto"}, {Phases: []string{"nope"}}, {Workers: -1}, {Sweep: []int{0}}, {Count: -1}, {Rate: -5}} {
		if err := o.setDefaults(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	o := Options{Phases: []string{PhaseReplay, PhaseAppend}}
	if err := o.setDefaults(); err != nil || !reflect.DeepEqual(o.Phases, []string{PhaseAppend, PhaseReplay}) {
		t.Errorf("phases %v (%v), want append, replay", o.Phases, err)
	}
}

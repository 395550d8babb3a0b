package bench

import (
	"math"
	"slices"
	"time"
)

// Recorder keeps every latency sample of one side of a phase, so the
// percentiles are exact (no histogram buckets). A few hundred thousand
// samples is a few MB; the phases here record far fewer. Not safe for
// concurrent use: give each worker its own and Merge them.
type Recorder struct {
	samples []time.Duration
	sorted  bool
}

// Add records one latency.
func (r *Recorder) Add(d time.Duration) {
	r.samples = append(r.samples, d)
	r.sorted = false
}

// Merge adds every sample of o.
func (r *Recorder) Merge(o *Recorder) {
	if o == nil || len(o.samples) == 0 {
		return
	}
	r.samples = append(r.samples, o.samples...)
	r.sorted = false
}

// Len is the number of samples.
func (r *Recorder) Len() int { return len(r.samples) }

func (r *Recorder) sort() {
	if !r.sorted {
		slices.Sort(r.samples)
		r.sorted = true
	}
}

// Percentile returns the nearest-rank percentile p (0 < p ≤ 100): the
// smallest sample such that at least p% of the samples are ≤ it. No
// samples: 0.
func (r *Recorder) Percentile(p float64) time.Duration {
	n := len(r.samples)
	if n == 0 {
		return 0
	}
	r.sort()
	// The epsilon keeps float error from rounding an exact rank up:
	// 99.9/100*1000 is 999.0000000000001.
	rank := int(math.Ceil(p/100*float64(n) - 1e-9))
	rank = min(max(rank, 1), n)
	return r.samples[rank-1]
}

// Summary is a latency distribution in milliseconds.
type Summary struct {
	Samples int     `json:"samples"`
	MeanMS  float64 `json:"mean_ms"`
	P50MS   float64 `json:"p50_ms"`
	P90MS   float64 `json:"p90_ms"`
	P99MS   float64 `json:"p99_ms"`
	P999MS  float64 `json:"p99_9_ms"`
	MaxMS   float64 `json:"max_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Summary returns the distribution; nil when there are no samples.
func (r *Recorder) Summary() *Summary {
	n := len(r.samples)
	if n == 0 {
		return nil
	}
	r.sort()
	var sum time.Duration
	for _, s := range r.samples {
		sum += s
	}
	return &Summary{
		Samples: n,
		MeanMS:  ms(sum / time.Duration(n)),
		P50MS:   ms(r.Percentile(50)),
		P90MS:   ms(r.Percentile(90)),
		P99MS:   ms(r.Percentile(99)),
		P999MS:  ms(r.Percentile(99.9)),
		MaxMS:   ms(r.samples[n-1]),
	}
}

package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Report is one `esjet bench` run. Its JSON form (--json) is stable: fields
// are only ever added.
type Report struct {
	Version   string   `json:"version"`
	GoVersion string   `json:"go_version"`
	CPUs      int      `json:"cpus"`
	Started   string   `json:"started"` // RFC 3339
	Seconds   float64  `json:"seconds"` // the whole run, setup included
	Server    Server   `json:"server"`
	Params    Params   `json:"params"`
	Phases    []Phase  `json:"phases"`
	Scale     *Scale   `json:"scale,omitempty"` // the scale phase, when it ran
	Notes     []string `json:"notes"`
}

// Server says what the phases ran against.
type Server struct {
	Embedded  bool   `json:"embedded"`
	URL       string `json:"url,omitempty"` // external mode, credentials redacted
	Sync      string `json:"sync"`          // "always", "interval" or "cluster" (external: the servers' own setting)
	Replicas  int    `json:"replicas"`
	Namespace string `json:"namespace"`
}

// Params are the run's settings.
type Params struct {
	DurationSeconds float64  `json:"duration_seconds,omitempty"` // per phase
	Count           int      `json:"count,omitempty"`            // operations per side per phase
	Rate            float64  `json:"rate,omitempty"`             // fixed arrival rate, ops/s; 0: closed loop
	Aggregates      int      `json:"aggregates"`
	Skew            string   `json:"skew"`
	Workers         int      `json:"workers"`
	Sweep           []int    `json:"workers_sweep,omitempty"` // --workers 1,32,256: each phase once per count
	Phases          []string `json:"phases"`
}

// Phase is one row of the table: esjet doing something, and raw JetStream
// doing the same work right beside it.
type Phase struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Unit        string `json:"unit"` // what one operation is
	Esjet       Side   `json:"esjet"`
	Raw         *Side  `json:"raw,omitempty"`
	// Ratio is esjet's throughput over raw's (1 = as fast as raw JetStream;
	// 0 when there is no raw pair).
	Ratio   float64 `json:"ratio,omitempty"`
	RatioOf string  `json:"ratio_of,omitempty"` // "throughput"
	// Workers is the phase's concurrency when the run sweeps --workers.
	Workers int `json:"workers,omitempty"`
	// SQLite is the SQLite-outbox baseline doing the same work (sqlite.go)
	// and SQLiteRatio esjet's throughput over it.
	SQLite      *Side   `json:"sqlite,omitempty"`
	SQLiteRatio float64 `json:"sqlite_ratio,omitempty"`
	// Batches and Batched: the atomic batches group commit formed during
	// the phase, and the decisions (receipts, in effects; commands, in
	// relay) stored through them.
	Batches uint64 `json:"group_commit_batches,omitempty"`
	Batched uint64 `json:"group_commit_batched,omitempty"`
	// ReadRounds and ReadsTogether (effects): the requests that read
	// together the receipts read during a receipts round, and those reads.
	ReadRounds    uint64 `json:"receipt_read_rounds,omitempty"`
	ReadsTogether uint64 `json:"receipt_reads_together,omitempty"`
	// RawGroup is raw JetStream's own group commit doing the append
	// phase's work (raw.GroupAppender: every append waiting while one
	// atomic batch is in flight goes in the next, no esjet code), when the
	// node group-commits; RawGroupRatio is esjet's throughput over it, and
	// RawGroupBatches/Batched its batches and the appends in them.
	RawGroup        *Side   `json:"raw_group_commit,omitempty"`
	RawGroupRatio   float64 `json:"raw_group_commit_ratio,omitempty"`
	RawGroupBatches int     `json:"raw_group_commit_batches,omitempty"`
	RawGroupBatched int     `json:"raw_group_commit_batched,omitempty"`
	// Conflicts are esjet operations that ended in a version conflict (409)
	// after the repository's retries; ConflictRate = Conflicts / attempts.
	Conflicts    int64   `json:"conflicts"`
	ConflictRate float64 `json:"conflict_rate"`
	// VersionConflicts are conflicts JetStream reported and the repository
	// retried internally (they cost time, not errors).
	VersionConflicts int64 `json:"version_conflicts_retried"`
	// SameAggregateWaits counts operations sent while another one on the
	// same aggregate was in flight: in esjet they queue on the aggregate's
	// in-process lock, in raw on its per-subject lock.
	SameAggregateWaits    int64  `json:"same_aggregate_waits"`
	RawSameAggregateWaits int64  `json:"raw_same_aggregate_waits"`
	Errors                int64  `json:"errors"`
	Error                 string `json:"error,omitempty"` // the first error, or why the phase stopped
	// Edge is the edge phase's figures beyond its row (edge.go).
	Edge *Edge `json:"edge,omitempty"`
	// Hops is the e2e phase's breakdown of a step's time, from the stored
	// times of its writes (hops.go).
	Hops *Hops `json:"hops,omitempty"`
}

// Side is one implementation's figures in a phase.
type Side struct {
	Ops       int64    `json:"ops"`
	Seconds   float64  `json:"seconds"` // measured time (setup excluded)
	OpsPerSec float64  `json:"ops_per_sec"`
	Errors    int64    `json:"errors"`
	Conflicts int64    `json:"conflicts"`
	Latency   *Summary `json:"latency,omitempty"`
	FirstErr  string   `json:"first_error,omitempty"`
}

func sideOf(r *Result) Side {
	s := Side{Ops: r.Ops, Seconds: r.Elapsed.Seconds(), Errors: r.Errors, Conflicts: r.Conflicts, Latency: r.Latency.Summary()}
	if s.Seconds > 0 {
		s.OpsPerSec = float64(r.Ops) / s.Seconds
	}
	if r.FirstErr != nil {
		s.FirstErr = r.FirstErr.Error()
	}
	return s
}

// pair fills the phase's sides and ratio from the two sides' results.
func (p *Phase) pair(es, raw *Result) {
	p.Esjet = sideOf(es)
	p.Conflicts = es.Conflicts
	if attempts := es.Ops + es.Conflicts + es.Errors; attempts > 0 {
		p.ConflictRate = float64(es.Conflicts) / float64(attempts)
	}
	p.SameAggregateWaits = es.Waits
	p.Errors = es.Errors
	if raw != nil {
		r := sideOf(raw)
		p.Raw = &r
		p.RawSameAggregateWaits = raw.Waits
		p.Errors += raw.Errors
		if r.OpsPerSec > 0 {
			p.Ratio = p.Esjet.OpsPerSec / r.OpsPerSec
			p.RatioOf = "throughput"
		}
	}
	if p.Error == "" {
		if p.Esjet.FirstErr != "" {
			p.Error = "esjet: " + p.Esjet.FirstErr
		} else if p.Raw != nil && p.Raw.FirstErr != "" {
			p.Error = "raw: " + p.Raw.FirstErr
		}
	}
}

// withSQLite adds the SQLite baseline's side and ratio.
func (p *Phase) withSQLite(r *Result) {
	s := sideOf(r)
	p.SQLite = &s
	p.Errors += r.Errors
	if s.OpsPerSec > 0 {
		p.SQLiteRatio = p.Esjet.OpsPerSec / s.OpsPerSec
	}
	if p.Error == "" && s.FirstErr != "" {
		p.Error = "sqlite: " + s.FirstErr
	}
}

// withRawGroup fills the raw group commit side (append, under group
// commit) from its result and the batches it formed.
func (p *Phase) withRawGroup(r *Result, batches, batched int) {
	s := sideOf(r)
	p.RawGroup = &s
	p.RawGroupBatches, p.RawGroupBatched = batches, batched
	p.Errors += r.Errors
	if s.OpsPerSec > 0 {
		p.RawGroupRatio = p.Esjet.OpsPerSec / s.OpsPerSec
	}
	if p.Error == "" && s.FirstErr != "" {
		p.Error = "raw group commit: " + s.FirstErr
	}
}

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the table for people (phase names left-aligned,
// figures right-aligned), the phases' errors, then the notes.
func (r *Report) WriteTable(w io.Writer) error {
	sqlite := slices.ContainsFunc(r.Phases, func(p Phase) bool { return p.SQLite != nil })
	head := []string{"PHASE", "ESJET OPS/S", "RAW OPS/S", "RATIO", "P50", "P90", "P99", "P99.9", "CONFLICTS", "ERRORS"}
	if sqlite {
		head = slices.Insert(head, 4, "SQLITE OPS/S", "VS SQLITE")
	}
	rows := [][]string{head}
	for _, p := range r.Phases {
		raw, ratio := "-", "-"
		if p.Raw != nil {
			raw = rate(p.Raw.OpsPerSec)
		}
		if p.Ratio > 0 {
			ratio = strconv.FormatFloat(p.Ratio, 'f', 2, 64)
		}
		lat := [4]string{"-", "-", "-", "-"}
		if l := p.Esjet.Latency; l != nil {
			lat = [4]string{dur(l.P50MS), dur(l.P90MS), dur(l.P99MS), dur(l.P999MS)}
		}
		name := phaseLabel(p)
		row := []string{name, rate(p.Esjet.OpsPerSec), raw, ratio, lat[0], lat[1], lat[2], lat[3],
			strconv.FormatInt(p.Conflicts, 10), strconv.FormatInt(p.Errors, 10)}
		if sqlite {
			sq, sr := "-", "-"
			if p.SQLite != nil {
				sq = rate(p.SQLite.OpsPerSec)
			}
			if p.SQLiteRatio > 0 {
				sr = strconv.FormatFloat(p.SQLiteRatio, 'f', 2, 64)
			}
			row = slices.Insert(row, 4, sq, sr)
		}
		rows = append(rows, row)
	}
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	if len(r.Phases) == 0 {
		rows = nil // the scale phase alone: no phase table
	}
	for _, row := range rows {
		for i, c := range row {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			switch {
			case i == 0:
				b.WriteString(c + pad)
			default:
				b.WriteString("  " + pad + c)
			}
		}
		b.WriteByte('\n')
	}
	sep := "\n"
	for _, p := range r.Phases {
		if p.Error != "" {
			fmt.Fprintf(&b, "%s%s failed: %s\n", sep, p.Name, oneLine(p.Error))
			sep = ""
		}
	}
	if r.Scale != nil {
		b.WriteByte('\n')
		r.Scale.write(&b)
	}
	sep = "\n"
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "%s%s\n", sep, n)
		sep = ""
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// rate formats ops/s: 12345 → "12,345"; below 100 with one decimal.
func rate(v float64) string {
	if v <= 0 {
		return "-"
	}
	if v < 100 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	s := strconv.FormatInt(int64(v+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// dur formats milliseconds with three significant digits: 0.0123 → "12.3µs",
// 1.5 → "1.50ms", 1234 → "1.23s".
func dur(msv float64) string {
	switch {
	case msv <= 0:
		return "0"
	case msv < 1:
		return sig3(msv*1000) + "µs"
	case msv < 1000:
		return sig3(msv) + "ms"
	default:
		return sig3(msv/1000) + "s"
	}
}

func sig3(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

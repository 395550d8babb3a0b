package raw

import (
	"errors"
	"fmt"
	"time"
)

// Side is one side's turn in a round: it does the round's work and returns
// how long its timed part took (set-up and shutdown may be left out).
type Side func() (time.Duration, error)

// Timed is the Side that times all of f.
func Timed(f func() error) Side {
	return func() (time.Duration, error) {
		start := time.Now()
		err := f()
		return time.Since(start), err
	}
}

// Totals is what one side of a Pair did over its successful rounds.
type Totals struct {
	Ops     int64
	Elapsed time.Duration
}

// PerSecond is the side's throughput (0 before any round).
func (t Totals) PerSecond() float64 {
	if t.Elapsed <= 0 {
		return 0
	}
	return float64(t.Ops) / t.Elapsed.Seconds()
}

// Pair times an esjet side and a raw side doing the same work in rounds,
// esjet first in even rounds and raw first in odd ones, so both share the
// machine's noise and neither always runs on the other's leftovers (a
// warm cache, a compacting store). The ratio of the two is the figure to
// read: absolute numbers on a shared machine drift from run to run.
type Pair struct {
	Esjet, Raw Totals
	rounds     int
}

// Round runs one round of both sides, n operations each. A side's totals
// grow only when it succeeds; both sides run even when the first one
// fails, and Round returns both errors, the raw one marked "raw: ".
func (p *Pair) Round(n int, esjet, raw Side) error {
	type turn struct {
		run    Side
		totals *Totals
		prefix string
	}
	turns := []turn{{esjet, &p.Esjet, ""}, {raw, &p.Raw, "raw: "}}
	if p.rounds%2 == 1 {
		turns[0], turns[1] = turns[1], turns[0]
	}
	p.rounds++
	var errs []error
	for _, t := range turns {
		elapsed, err := t.run()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s%w", t.prefix, err))
			continue
		}
		t.totals.Ops += int64(n)
		t.totals.Elapsed += elapsed
	}
	return errors.Join(errs...)
}

// Rounds is how many rounds ran.
func (p *Pair) Rounds() int { return p.rounds }

// Ratio is esjet's throughput over raw's: 1 is as fast as raw JetStream
// (0 before both sides have a successful round).
func (p *Pair) Ratio() float64 {
	if p.Raw.PerSecond() == 0 {
		return 0
	}
	return p.Esjet.PerSecond() / p.Raw.PerSecond()
}

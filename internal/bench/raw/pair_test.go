package raw

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPairAlternatesWhichSideGoesFirst(t *testing.T) {
	var p Pair
	var order []string
	side := func(name string, d time.Duration) Side {
		return func() (time.Duration, error) {
			order = append(order, name)
			return d, nil
		}
	}
	for range 3 {
		if err := p.Round(10, side("esjet", 2*time.Second), side("raw", time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"esjet", "raw", "raw", "esjet", "esjet", "raw"}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	if p.Rounds() != 3 || p.Esjet != (Totals{30, 6 * time.Second}) || p.Raw != (Totals{30, 3 * time.Second}) {
		t.Errorf("rounds %d, esjet %+v, raw %+v", p.Rounds(), p.Esjet, p.Raw)
	}
	if p.Esjet.PerSecond() != 5 || p.Ratio() != 0.5 {
		t.Errorf("esjet %g/s, ratio %g: want 5/s and 0.5", p.Esjet.PerSecond(), p.Ratio())
	}
}

func TestPairRunsBothSidesAndCountsOnlySuccesses(t *testing.T) {
	var p Pair
	ran := 0
	fail := func() (time.Duration, error) { ran++; return time.Second, errors.New("boom") }
	ok := func() (time.Duration, error) { ran++; return time.Second, nil }
	err := p.Round(5, fail, fail)
	if ran != 2 || err == nil || !strings.Contains(err.Error(), "raw: boom") || strings.Count(err.Error(), "boom") != 2 {
		t.Fatalf("ran %d sides, err %v: want both run and both errors, raw's marked", ran, err)
	}
	if err := p.Round(5, ok, fail); err == nil {
		t.Fatal("a failing raw side returned no error")
	}
	if p.Esjet != (Totals{5, time.Second}) || p.Raw != (Totals{}) {
		t.Errorf("esjet %+v, raw %+v: want only the successful round counted", p.Esjet, p.Raw)
	}
	if p.Ratio() != 0 {
		t.Errorf("ratio %g with no raw round, want 0", p.Ratio())
	}
}

func TestTimedTimesTheWholeFunc(t *testing.T) {
	d, err := Timed(func() error { time.Sleep(5 * time.Millisecond); return nil })()
	if err != nil || d < 5*time.Millisecond {
		t.Errorf("Timed = %s, %v: want at least 5ms and no error", d, err)
	}
}

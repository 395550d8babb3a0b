package config

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
)

// DefaultWorker is what a command kind's workers use for the tunables its
// workers.<kind> entry leaves zero (and for a kind served only by a Go
// handler): 4 workers, a 30s lease and timeout, and 15 attempts with a
// backoff from 500ms doubling to 1m. That retries for about 8 minutes, so a
// target that restarts, or is down for a few minutes, costs a delay rather
// than a dead letter and a compensated saga. No rate limit (with one, a
// burst of 0 means 1: the workers' default, consumer.KindConfig).
func DefaultWorker() Worker {
	return Worker{
		Pool:           4,
		AckWait:        Duration(30 * time.Second),
		Timeout:        Duration(30 * time.Second),
		MaxAttempts:    15,
		BackoffInitial: Duration(500 * time.Millisecond),
		BackoffMax:     Duration(time.Minute),
	}
}

// WithDefaults returns w with its zero tunables taken from [DefaultWorker].
func (w Worker) WithDefaults() Worker {
	d := DefaultWorker()
	if w.Pool == 0 {
		w.Pool = d.Pool
	}
	if w.AckWait == 0 {
		w.AckWait = d.AckWait
	}
	if w.Timeout == 0 {
		w.Timeout = d.Timeout
	}
	if w.MaxAttempts == 0 {
		w.MaxAttempts = d.MaxAttempts
	}
	if w.BackoffInitial == 0 {
		w.BackoffInitial = d.BackoffInitial
	}
	if w.BackoffMax == 0 {
		w.BackoffMax = d.BackoffMax
	}
	return w
}

// RetryBackoff is the sum of the delays between the attempts (jitter
// aside): how long a target may be unreachable, answering at once with an
// error, before the command is dead-lettered. Zero tunables mean their
// defaults.
func (w Worker) RetryBackoff() time.Duration {
	w = w.WithDefaults()
	var total time.Duration
	for n := 1; n < w.MaxAttempts; n++ {
		total += min(w.BackoffInitial.Std()<<min(n-1, 20), w.BackoffMax.Std())
	}
	return total
}

// RetryHorizon is the longest a command may stay in retry: [Worker.RetryBackoff]
// plus every attempt running to its timeout. OUTBOX must keep a command at
// least that long.
func (w Worker) RetryHorizon() time.Duration {
	w = w.WithDefaults()
	return w.RetryBackoff() + time.Duration(w.MaxAttempts)*w.Timeout.Std()
}

// validateRetryHorizon checks that OUTBOX keeps a command for as long as
// its workers may retry it (path names the workers entry, or "" for the
// defaults).
func (c *Config) validateRetryHorizon(v *validator, path string, w Worker) {
	maxAge := c.Streams.OutboxMaxAge
	if maxAge <= 0 {
		return // reported by Streams.validate
	}
	h := w.RetryHorizon()
	if maxAge.Std() >= h {
		return
	}
	who := "the default worker settings"
	if path != "" {
		who = path
	}
	v.add("streams.outbox_max_age", maxAge, fmt.Sprintf(
		"must be at least the retry horizon of %s (%s: %d attempts, backoff up to %s, timeout %s), or a command still being retried ages out of OUTBOX; raise it or lower max_attempts",
		who, h.Round(time.Second), w.WithDefaults().MaxAttempts, w.WithDefaults().BackoffMax, w.WithDefaults().Timeout))
}

// maxRate is the highest rate limit: each call costs a read and a
// compare-and-set of one KV key, which one key takes some thousands of
// times a second at best.
const maxRate = 1000

// validateFlow checks a kind's flow-control knobs (path names its workers
// entry).
func validateFlow(v *validator, path string, w Worker) {
	switch {
	case w.Rate < 0 || math.IsNaN(w.Rate):
		v.add(path+".rate", w.Rate, "calls per second across the fleet: use 0 (no limit) or more, e.g. 50 or 0.5")
	case w.Rate > maxRate:
		v.add(path+".rate", w.Rate, fmt.Sprintf("at most %d calls per second (each call takes a token from one KV key); leave it 0 for no limit", maxRate))
	}
	switch {
	case w.Burst < 0:
		v.add(path+".burst", w.Burst, "use 0 (default 1) or more")
	case w.Burst > 0 && w.Rate == 0:
		v.add(path+".burst", w.Burst, "a burst needs a rate: set rate too, or remove burst")
	case float64(w.Burst) > max(w.Rate*60, 1):
		v.add(path+".burst", w.Burst, fmt.Sprintf("at most a minute's calls (%g at rate %g): a larger burst lets the target see more than the rate for minutes", max(w.Rate*60, 1), w.Rate))
	}
}

// maxConcurrency is the most calls in flight per key: a command waiting for
// its key tries each of the key's slots (a KV create) every time it wakes.
const maxConcurrency = 64

// fieldName is one name of a concurrency_key path.
var fieldName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// validateKeyLimit checks a kind's concurrency per key (path names its
// workers entry).
func validateKeyLimit(v *validator, path string, w Worker) {
	if w.Schema < 0 {
		v.add(path+".schema", w.Schema, "the newest schema version of the kind's payload the target understands: use 1 or more (0 means 1)")
	}
	switch {
	case w.Concurrency < 0:
		v.add(path+".concurrency", w.Concurrency, "calls in flight per key: use 1 or more (0 means 1)")
	case w.Concurrency > 0 && w.ConcurrencyKey == "":
		v.add(path+".concurrency", w.Concurrency, "a limit per key needs concurrency_key: aggregate_id or a payload field, e.g. booking_id")
	case w.Concurrency > maxConcurrency:
		v.add(path+".concurrency", w.Concurrency, fmt.Sprintf("at most %d calls in flight per key (a waiting command tries every slot of its key); leave concurrency_key out for no limit", maxConcurrency))
	}
	if w.ConcurrencyKey == "" {
		return
	}
	for name := range strings.SplitSeq(w.ConcurrencyKey, ".") {
		if !fieldName.MatchString(name) {
			v.add(path+".concurrency_key", w.ConcurrencyKey, "aggregate_id, or a payload field path of names made of letters, digits, _ and - joined by dots (booking_id, booking.id)")
			return
		}
	}
}

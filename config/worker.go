package config

import (
	"fmt"
	"time"
)

// DefaultWorker is what a command kind's workers use for the tunables its
// workers.<kind> entry leaves zero (and for a kind served only by a Go
// handler): 4 workers, a 30s lease and timeout, and 15 attempts with a
// backoff from 500ms doubling to 1m. That retries for about 8 minutes, so a
// target that restarts, or is down for a few minutes, costs a delay rather
// than a dead letter and a compensated saga.
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

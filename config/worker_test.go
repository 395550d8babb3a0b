package config

import (
	"strings"
	"testing"
	"time"
)

// TestDefaultWorkerRidesOutATargetRestart pins issue 11's "the default retry
// horizon is ~7 s": a target down for 5 minutes, failing every attempt at
// once, must not exhaust the default attempts (even with the backoff's
// jitter at its shortest, -10%).
func TestDefaultWorkerRidesOutATargetRestart(t *testing.T) {
	w := DefaultWorker()
	if got := w.RetryBackoff() * 9 / 10; got < 5*time.Minute {
		t.Fatalf("default retry backoff %s (%d attempts, %s to %s): a target down for 5 minutes dead-letters its commands",
			w.RetryBackoff(), w.MaxAttempts, w.BackoffInitial, w.BackoffMax)
	}
	if got := (Worker{}).RetryBackoff(); got != w.RetryBackoff() {
		t.Fatalf("zero Worker backoff %s, want the default's %s", got, w.RetryBackoff())
	}
	small := Worker{MaxAttempts: 3, BackoffInitial: Duration(time.Second), BackoffMax: Duration(90 * time.Second), Timeout: Duration(time.Second)}
	if got := small.RetryBackoff(); got != 3*time.Second {
		t.Fatalf("3 attempts from 1s: backoff %s, want 3s (1s + 2s)", got)
	}
	if got := small.RetryHorizon(); got != 6*time.Second {
		t.Fatalf("3 attempts from 1s, timeout 1s: horizon %s, want 6s", got)
	}
}

func TestOutboxMaxAgeCoversTheRetryHorizon(t *testing.T) {
	cfg := Default()
	cfg.Streams.OutboxMaxAge = Duration(12 * time.Minute) // ≥ both dedup windows, < the default horizon (~15.5 min)
	err := cfg.Validate()
	if got := fieldErrors(t, err); got["streams.outbox_max_age"] == nil || len(got) != 1 || !strings.Contains(err.Error(), "default worker") {
		t.Fatalf("outbox_max_age below the default retry horizon: Validate() = %v", err)
	}
	cfg = Default()
	cfg.Workers = map[string]Worker{"slow_kind": {Target: TargetNATS, Subject: "x.slow", MaxAttempts: 40, BackoffMax: Duration(12 * time.Hour)}}
	err = cfg.Validate()
	if got := fieldErrors(t, err); got["streams.outbox_max_age"] == nil || len(got) != 1 || !strings.Contains(err.Error(), "workers.slow_kind") {
		t.Fatalf("a worker retrying past outbox_max_age: Validate() = %v", err)
	}
}

func TestConcurrencyPerKeyIsChecked(t *testing.T) {
	for _, c := range []struct {
		w     Worker
		field string
	}{
		{Worker{Concurrency: -1, ConcurrencyKey: "booking_id"}, "workers.k.concurrency"},
		{Worker{Concurrency: 2}, "workers.k.concurrency"},
		{Worker{Concurrency: 65, ConcurrencyKey: "booking_id"}, "workers.k.concurrency"},
		{Worker{ConcurrencyKey: "booking..id"}, "workers.k.concurrency_key"},
		{Worker{ConcurrencyKey: "booking id"}, "workers.k.concurrency_key"},
		{Worker{ConcurrencyKey: "*"}, "workers.k.concurrency_key"},
	} {
		cfg := Default()
		c.w.Target, c.w.Subject = TargetNATS, "x.k"
		cfg.Workers = map[string]Worker{"k": c.w}
		err := cfg.Validate()
		if got := fieldErrors(t, err); got[c.field] == nil || len(got) != 1 {
			t.Errorf("%+v: Validate() = %v, want one error on %s", c.w, err, c.field)
		}
	}
	for _, w := range []Worker{{ConcurrencyKey: "aggregate_id"}, {ConcurrencyKey: "booking.id", Concurrency: 3}} {
		cfg := Default()
		w.Target, w.Subject = TargetNATS, "x.k"
		cfg.Workers = map[string]Worker{"k": w}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%+v: %v", w, err)
		}
	}
}

func TestBackoffInitialAboveBackoffMaxIsRefused(t *testing.T) {
	for _, c := range []struct {
		w    Worker
		want string
	}{
		{Worker{BackoffInitial: Duration(2 * time.Minute), BackoffMax: Duration(time.Second)}, "must be at most backoff_max (1s)"},
		{Worker{BackoffInitial: Duration(2 * time.Minute)}, "must be at most the default backoff_max (1m)"},
	} {
		cfg := Default()
		c.w.Target = TargetGo
		cfg.Workers = map[string]Worker{"k": c.w}
		err := cfg.Validate()
		if got := fieldErrors(t, err); got["workers.k.backoff_initial"] == nil || len(got) != 1 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: Validate() = %v, want one error on workers.k.backoff_initial saying %q", c.w, err, c.want)
		}
	}
	cfg := Default()
	cfg.Workers = map[string]Worker{"k": {Target: TargetGo, BackoffInitial: Duration(time.Second), BackoffMax: Duration(time.Second)}}
	if err := cfg.Validate(); err != nil {
		t.Errorf("backoff_initial equal to backoff_max: %v", err)
	}
	// backoff_max alone, below the default first delay: the delays start at it.
	cfg.Workers = map[string]Worker{"k": {Target: TargetGo, BackoffMax: Duration(100 * time.Millisecond)}}
	if err := cfg.Validate(); err != nil {
		t.Errorf("backoff_max alone, under the default backoff_initial: %v", err)
	}
}

package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/ops"
)

// TestOutboxShowsWhetherAnyWorkerPullsAndWarnsOfStalledKinds: the WORKERS
// column says whether anyone pulls a kind, not just that its consumer
// exists, and a kind with pending commands that nobody pulls is called out.
func TestOutboxShowsWhetherAnyWorkerPullsAndWarnsOfStalledKinds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	kinds := []ops.KindStats{
		{Kind: "book_flight", Consumer: "esjet-worker-book_flight", Pending: 0, Waiting: 2, Pulling: true, LastActive: now.Add(-time.Second)},
		{Kind: "book_hotel", Consumer: "esjet-worker-book_hotel", Pending: 4, InFlight: 4, Pulling: true, LastActive: now.Add(-3 * time.Second)},
		{Kind: "charge", Consumer: "esjet-worker-charge", Pending: 5, Stalled: true, LastActive: now.Add(-3 * time.Hour)},
		{Kind: "notify", Pending: 2, Stalled: true},
		{Kind: "old", Consumer: "esjet-worker-old", Done: 9, LastActive: now.Add(-48 * time.Hour)},
	}
	var b bytes.Buffer
	printOutbox(&b, "demo", ops.Lag{RelayConsumer: true, AckFloor: 7}, kinds, now)
	out := b.String()
	for _, want := range []string{
		`(?m)^book_flight .*\s2 waiting$`,
		`(?m)^book_hotel .*\sbusy, last active 3s ago$`,
		`(?m)^charge .*\sNONE PULLING, last active 3h0m0s ago$`,
		`(?m)^notify .*\sNONE \(no worker ever ran\)$`,
		`(?m)^old .*\snone pulling, last active 48h0m0s ago$`,
		`WARNING: 5 charge command\(s\) pending and no worker is pulling them`,
		`WARNING: 2 notify command\(s\) pending and no worker is pulling them`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("no %s in:\n%s", want, out)
		}
	}
	if strings.Count(out, "WARNING") != 2 {
		t.Errorf("want exactly the two stalled kinds warned about:\n%s", out)
	}
}

// TestLateEffectIsShownByReconcileAndOutbox: an effect completed after its
// aggregate was told the command failed is drift in `esjet reconcile` and a
// warning in `esjet outbox <id>`.
func TestLateEffectIsShownByReconcileAndOutbox(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := ops.Counts{Issued: 1, InOutbox: 1, Completed: 1, LateEffects: 1}
	rep := ops.Report{Namespace: "demo", At: at, RelayConsumer: true, Kinds: map[string]ops.Counts{"lock_budget": c}, Totals: c,
		LateEffects: []ops.LateEffect{{ID: "trip:t1:1:0", Kind: "lock_budget"}}}
	var b bytes.Buffer
	printReconcile(&b, rep)
	out := b.String()
	for _, want := range []string{`(?m)^KIND .*\sLATE$`, `(?m)^lock_budget .*\s1$`, `drift 1: .* 1 late effect\(s\)`,
		`late effects \(done after the aggregate was told <kind>_failed`, `(?m)^  trip:t1:1:0\s+lock_budget$`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("reconcile: no %s in:\n%s", want, out)
		}
	}
	b.Reset()
	printCommand(&b, ops.CommandInfo{ID: "trip:t1:1:0", Kind: "lock_budget", LateEffect: true,
		Reported: []ops.ReportedOutcome{{Outcome: "failed", DecisionID: "d-1", Seq: 7, Time: at}}})
	out = b.String()
	if !strings.Contains(out, "reported  failed to the aggregate: decision d-1, log seq 7") || !strings.Contains(out, "WARNING: late effect") {
		t.Errorf("outbox <id>:\n%s", out)
	}
}

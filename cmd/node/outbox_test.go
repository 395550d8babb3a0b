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

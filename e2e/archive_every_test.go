package e2e

// Issue 34, "the node archives periodically": with archive.every set, the
// node archives closed trips by itself. Killed -9 in the middle of its
// pass (after a tombstone, before its purge), the node that comes next
// takes the pass over once the dead one's hold on the pass record lapses,
// finishes what was cut, and every trip reads the same history and state.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/archive"
	"github.com/esjet/esjet/internal/failpoint"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/wire"
)

func TestTheNodeArchivesByItselfAndResumesAPassCutByAKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "esjet.yaml")
	if err := os.WriteFile(cfg, []byte(archiveConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	// First without passes: the trips close and settle, and their
	// histories are read from the log.
	n := startNodeEnv(t, dir, []string{"ESJET_ARCHIVE_EVERY=0s"}, "--config", cfg)
	const trips = 5
	ids := make([]string, trips)
	for i := range ids {
		ids[i] = fmt.Sprintf("p%d", i)
		sendTrip(t, n, ids[i], fmt.Sprintf(`{"traveler":"t%d","destination":"Lisbon","budget":100000,"flight_price":40000,"hotel_price":30000}`, i))
	}
	for _, id := range ids {
		waitTrip(t, n, id, sagaTimeout, "confirmed", func(s tripState) bool { return s.Status == "confirmed" })
	}
	settledReconcile(t, n.natsURL)
	before := map[string][]json.RawMessage{}
	states := map[string]string{}
	for _, id := range ids {
		before[id] = tripHistory(t, n, id)
		states[id] = tripStateJSON(t, n, id)
	}
	n.stop(t, os.Interrupt)

	// With passes every 2s: the first pass starts with the node and is
	// killed -9 after its 2nd tombstone, before that trip's purge.
	n = startNodeEnv(t, dir, []string{"ESJET_ARCHIVE_EVERY=2s", failpoint.EnvVar + "=" + failpoint.ArchiveAfterTombstone + "=kill@2"}, "--config", cfg)
	n.crashed(t)

	// The next node finds the dead node's hold on the pass record, waits
	// for it to lapse and resumes the pass (at once, whatever its every:
	// a long one keeps the next pass from overwriting the record here).
	start := time.Now()
	n = startNodeEnv(t, dir, []string{"ESJET_ARCHIVE_EVERY=1h"}, "--config", cfg)
	var ready struct {
		Archive archive.Status `json:"archive"`
	}
	natstest.Eventually(t, archive.PassLeaseTTL+30*time.Second, func() bool {
		ready.Archive = archive.Status{}
		return getJSON(t, "http://"+n.httpAddr+"/readyz", &ready) == http.StatusOK &&
			ready.Archive.Pass != nil && ready.Archive.Pass.Resumed && ready.Archive.Pass.Last != nil
	})
	p := ready.Archive.Pass
	t.Logf("resumed after %s: %+v, last %+v", time.Since(start).Round(time.Second), *p, *p.Last)
	if p.CutBy == "" || p.By == p.CutBy || p.Last.Finished != 1 || p.Last.Archived != trips-2 || p.Last.Already != 1 {
		t.Errorf("the resumed pass: %+v, last %+v; want it to finish the cut trip's purge, archive the %d left and find 1 done", *p, *p.Last, trips-2)
	}
	if ready.Archive.Every != "1h0m0s" || ready.Archive.NotAllowed != "" {
		t.Errorf("/readyz archive: %+v", ready.Archive)
	}
	for _, id := range ids {
		after := tripHistory(t, n, id)
		if len(after) != len(before[id])+1 {
			t.Errorf("trip %s has %d events, want the %d before and its tombstone", id, len(after), len(before[id]))
			continue
		}
		for i := range before[id] {
			if string(after[i]) != string(before[id][i]) {
				t.Errorf("trip %s event %d reads\n%s\nwas\n%s", id, i, after[i], before[id][i])
			}
		}
		if last := string(after[len(after)-1]); !strings.Contains(last, `"type":"`+wire.EventArchived+`"`) {
			t.Errorf("trip %s last event %s, want its tombstone", id, last)
		}
		if got := tripStateJSON(t, n, id); got != states[id] {
			t.Errorf("trip %s state\n%s\nwant\n%s", id, got, states[id])
		}
	}
	out := runCLI(t, dir, "--config", cfg, "--url", n.natsURL, "archive", "status")
	if !strings.Contains(out, "passes") || !strings.Contains(out, "last by "+p.By) {
		t.Errorf("esjet archive status:\n%s", out)
	}
	if out := runCLI(t, dir, "--config", cfg, "--url", n.natsURL, "archive", "run"); !strings.Contains(out, "archived 0 aggregate(s)") ||
		!strings.Contains(out, fmt.Sprintf("%d archived before (0 of them purged now)", trips)) {
		t.Errorf("an archive run after the node's passes:\n%s", out)
	}
	settledReconcile(t, n.natsURL)
}

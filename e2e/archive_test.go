package e2e

// Issue 34, "archive what is closed": closed trips are moved to the
// archive by `esjet archive run`, killed twice in the middle (after an
// archive object is written, and after a tombstone is appended but before
// the purge) and run again. Afterwards every trip's subject holds only its
// tombstone, every trip reads the same history (from the archive) and the
// same state (from the tombstone), before and after a node restart; a
// command to an archived trip is refused as the type says, and reconcile
// reports no drift.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/failpoint"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/projection"
	"github.com/esjet/esjet/internal/wire"
)

const archiveConfig = `archive:
  types:
    trip:
      closed_by: [trip_confirmed, trip_cancelled]
      after: 0s
      on_command: refuse
`

// tripHistory is a trip's events as GET /v1/trip/<id>/events returns them,
// each event's JSON exactly as answered.
func tripHistory(t *testing.T, n *node, id string) []json.RawMessage {
	t.Helper()
	var h struct {
		Events []json.RawMessage `json:"events"`
	}
	if code := getJSON(t, "http://"+n.httpAddr+"/v1/trip/"+id+"/events?limit=1000", &h); code != http.StatusOK {
		t.Fatalf("GET events of trip %s: %d", id, code)
	}
	return h.Events
}

func tripStateJSON(t *testing.T, n *node, id string) string {
	t.Helper()
	var st struct {
		State json.RawMessage `json:"state"`
	}
	if code := getJSON(t, "http://"+n.httpAddr+"/v1/trip/"+id, &st); code != http.StatusOK {
		t.Fatalf("GET trip %s: %d", id, code)
	}
	return string(st.State)
}

// tripSubjects counts the messages on each trip subject of EVENTS.
func tripSubjects(t *testing.T, js jetstream.JetStream) map[string]uint64 {
	t.Helper()
	st, err := js.Stream(t.Context(), wire.NamesFor("demo").Events)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(wire.NamesFor("demo").TypeFilter("trip")))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects
}

func TestArchiveThroughKillsLosesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "esjet.yaml")
	if err := os.WriteFile(cfg, []byte(archiveConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, dir, "--config", cfg)
	const trips = 8
	ids := make([]string, trips)
	for i := range ids {
		ids[i] = fmt.Sprintf("a%d", i)
		dest := "Lisbon"
		if i%4 == 3 {
			dest = "Atlantis" // no seats: cancelled and compensated
		}
		sendTrip(t, n, ids[i], fmt.Sprintf(`{"traveler":"t%d","destination":"%s","budget":100000,"flight_price":40000,"hotel_price":30000}`, i, dest))
	}
	for _, id := range ids {
		waitTrip(t, n, id, sagaTimeout, "closed", func(s tripState) bool { return s.Status == "confirmed" || s.Status == "cancelled" })
	}
	// The saga of a cancelled trip goes on a little after it closed (the
	// compensations' outcomes): take the picture once everything settled.
	settledReconcile(t, n.natsURL)
	before := map[string][]json.RawMessage{}
	states := map[string]string{}
	for _, id := range ids {
		before[id] = tripHistory(t, n, id)
		states[id] = tripStateJSON(t, n, id)
	}
	// The views, once they have caught up with every trip.
	docs := map[string]string{}
	natstest.Eventually(t, sagaTimeout, func() bool {
		for _, id := range ids {
			st := map[bool]string{true: "confirmed", false: "cancelled"}[!strings.Contains(states[id], `"status":"cancelled"`)]
			doc, ok := viewDoc(t, n, "trips_by_status/"+st+"/"+id)
			if !ok {
				return false
			}
			docs[st+"/"+id] = doc
		}
		return true
	})
	nc, err := nats.Connect(n.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)

	// Killed after writing the 2nd archive object, before its tombstone.
	_, stderr, code := runCLIFailEnv(t, dir, []string{failpoint.EnvVar + "=" + failpoint.ArchiveAfterPut + "=kill@2"}, "--config", cfg, "--url", n.natsURL, "archive", "run")
	if code != -1 {
		t.Fatalf("archive run exited %d, want killed at %s:\n%s", code, failpoint.ArchiveAfterPut, stderr)
	}
	// Killed after appending the 2nd tombstone of this run, before its purge.
	_, stderr, code = runCLIFailEnv(t, dir, []string{failpoint.EnvVar + "=" + failpoint.ArchiveAfterTombstone + "=kill@2"}, "--config", cfg, "--url", n.natsURL, "archive", "run")
	if code != -1 {
		t.Fatalf("archive run exited %d, want killed at %s:\n%s", code, failpoint.ArchiveAfterTombstone, stderr)
	}
	half := tripSubjects(t, js)
	unpurged := 0
	for _, c := range half {
		if c > 1 {
			unpurged++
		}
	}
	if unpurged == 0 {
		t.Fatalf("after two kills every trip is already archived and purged: %v", half)
	}
	// Reads in the middle: an aggregate with a tombstone and its messages
	// not yet purged reads as one archived.
	for _, id := range ids {
		if got := tripStateJSON(t, n, id); got != states[id] {
			t.Errorf("trip %s state mid-archive:\n%s\nwant\n%s", id, got, states[id])
		}
	}
	out := runCLI(t, dir, "--config", cfg, "--url", n.natsURL, "archive", "run")
	t.Logf("esjet archive run, the third time:\n%s", out)
	// A cancelled trip's book_flight is an open dead letter: it may still
	// be retried (and report to the trip), so the trip is not settled
	// until an operator discards it.
	if !strings.Contains(out, fmt.Sprintf("%d not settled", trips/4)) {
		t.Fatalf("archive run with open dead letters: want %d not settled:\n%s", trips/4, out)
	}
	for i, id := range ids {
		if i%4 == 3 {
			runCLI(t, dir, "--url", n.natsURL, "dlq", "discard", "trip:"+id+":2:0", "--reason", "no seats, trip cancelled")
		}
	}
	out = runCLI(t, dir, "--config", cfg, "--url", n.natsURL, "archive", "run")
	if !strings.Contains(out, fmt.Sprintf("archived %d aggregate(s)", trips/4)) {
		t.Fatalf("archive run after the dead letters were discarded:\n%s", out)
	}

	subjects := tripSubjects(t, js)
	if len(subjects) != trips {
		t.Fatalf("%d trip subjects, want %d: %v", len(subjects), trips, subjects)
	}
	for s, c := range subjects {
		if c != 1 {
			t.Errorf("%s holds %d messages after archiving, want its tombstone only", s, c)
		}
	}
	check := func(n *node, when string) {
		t.Helper()
		for _, id := range ids {
			after := tripHistory(t, n, id)
			if len(after) != len(before[id])+1 {
				t.Errorf("%s: trip %s has %d events, want the %d before and its tombstone", when, id, len(after), len(before[id]))
				continue
			}
			for i := range before[id] {
				if string(after[i]) != string(before[id][i]) {
					t.Errorf("%s: trip %s event %d reads\n%s\nwas\n%s", when, id, i, after[i], before[id][i])
				}
			}
			if last := string(after[len(after)-1]); !strings.Contains(last, `"type":"`+wire.EventArchived+`"`) {
				t.Errorf("%s: trip %s last event %s, want its tombstone", when, id, last)
			}
			if got := tripStateJSON(t, n, id); got != states[id] {
				t.Errorf("%s: trip %s state\n%s\nwant\n%s", when, id, got, states[id])
			}
			code, body := post(t, "http://"+n.httpAddr+"/v1/trip/"+id+"/request_trip", `{"traveler":"x","destination":"Rome","budget":1,"flight_price":1,"hotel_price":1}`, nil)
			if code != http.StatusConflict || !strings.Contains(string(body), `"archived"`) {
				t.Errorf("%s: a command to archived trip %s: %d %s, want 409 archived", when, id, code, body)
			}
		}
		cli := runCLI(t, dir, "events", "trip", ids[0], "--url", n.natsURL)
		if !strings.Contains(cli, "trip_requested") || !strings.Contains(cli, wire.EventArchived) {
			t.Errorf("%s: esjet events of an archived trip:\n%s", when, cli)
		}
		settledReconcile(t, n.natsURL)
	}
	check(n, "after archiving")
	// A rebuild of a view after archiving replays the archived events
	// (the demo's views keep the default, projection.ArchivedReplay):
	// the same documents.
	views := projection.NewViews(js, "demo", 0)
	gen, err := views.Rebuild(t.Context(), "trips_by_status")
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, time.Minute, func() bool {
		st, err := views.Status(t.Context(), "trips_by_status")
		return err == nil && st.Active == gen && st.Building == 0
	})
	for path, want := range docs {
		if got, ok := viewDoc(t, n, "trips_by_status/"+path); got != want {
			t.Errorf("view document %s after a rebuild over archived trips: %s (found %v), want %s", path, got, ok, want)
		}
	}
	backup := filepath.Join(dir, "archived.esjet-backup.gz")
	runCLI(t, dir, "backup", "--url", n.natsURL, "--out", backup)
	if b := gunzip(t, backup); !bytes.Contains(b, []byte(wire.ObjStream(wire.ArchiveBucket("demo")))) {
		t.Errorf("the backup lacks the archive bucket %s", wire.ObjStream(wire.ArchiveBucket("demo")))
	}
	n.kill9(t)
	n2 := startNode(t, dir, "--config", cfg)
	check(n2, "after a restart")
	// A second pass finds nothing left to do.
	if out := runCLI(t, dir, "--config", cfg, "--url", n2.natsURL, "archive", "run"); !strings.Contains(out, "archived 0 aggregate(s)") {
		t.Errorf("a second archive run:\n%s", out)
	}
}

package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
)

// TestForgetTraveler is issue 34's done-when for crypto-shredding: trips
// for a traveler, then `esjet forget`; afterwards the traveler's name is
// in no file of the node's data directory nor of a backup, every read
// shows the fields as erased, the other traveler's trips read as before,
// the saga's state and the views stay consistent and reconcile finds no
// drift.
func TestForgetTraveler(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "esjet.yaml")
	// Snapshots every 2 events: the trip's snapshots are written too.
	if err := os.WriteFile(cfg, []byte("aggregates:\n  snapshot_every: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, dir, "--config", cfg)
	const name, other = "Quintessa Vandermolen", "Otto Kontrollmann"
	trips := map[string]string{"q1": name, "q2": name, "o1": other}
	for id, who := range trips {
		sendTrip(t, n, id, fmt.Sprintf(edgeTripBody, who))
	}
	for id := range trips {
		waitTrip(t, n, id, sagaTimeout, "confirmed", func(s tripState) bool { return s.Status == "confirmed" })
	}
	// While the key exists every read shows the name.
	if got := travelerOf(t, n, "q1"); got != name {
		t.Fatalf("state of q1 before the forget: traveler %q", got)
	}
	if ev := tripEvents(t, n, "q1"); !strings.Contains(string(ev[0].Data), name) {
		t.Fatalf("trip_requested of q1 before the forget: %s", ev[0].Data)
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		body, ok := viewDoc(t, n, "traveler_spend/Quintessa_Vandermolen")
		return ok && strings.Contains(body, `"confirmed":2`)
	})
	// The log, OUTBOX and the snapshots never held it in plaintext.
	for _, stream := range []string{"DEMO_EVENTS", "DEMO_OUTBOX", "KV_demo_snapshots"} {
		if f := grepTree(t, filepath.Join(dir, "data"), stream, "Vandermolen"); f != "" {
			t.Fatalf("the traveler's name is in %s before any forget", f)
		}
	}

	out := runCLI(t, dir, "forget", name, "--url", n.natsURL)
	if !strings.Contains(out, "forgot subject ") || strings.Contains(out, "Vandermolen") {
		t.Fatalf("esjet forget printed %q", out)
	}

	for _, id := range []string{"q1", "q2"} {
		st := waitTrip(t, n, id, sagaTimeout, "still confirmed", func(s tripState) bool { return s.Status == "confirmed" })
		if st.Flight.BookingRef == "" || st.Hotel.BookingRef == "" {
			t.Errorf("trip %s lost its non-personal state: %+v", id, st)
		}
		if got := travelerOf(t, n, id); got != "" {
			t.Errorf("state of %s after the forget: traveler %q, want erased", id, got)
		}
		ev := tripEvents(t, n, id)
		requireOnce(t, ev, "trip_requested", "budget_locked", "flight_booked", "hotel_booked", "trip_confirmed")
		var req map[string]json.RawMessage
		_ = json.Unmarshal(ev[0].Data, &req)
		if string(req["traveler"]) != "null" || string(req["esjet:erased"]) != `["traveler"]` || string(req["destination"]) != `"Lisbon"` {
			t.Errorf("trip_requested of %s after the forget: %s", id, ev[0].Data)
		}
	}
	if got := travelerOf(t, n, "o1"); got != other {
		t.Errorf("the other traveler's trip reads %q", got)
	}
	cli := runCLI(t, dir, "events", "trip", "q1", "--json", "--url", n.natsURL)
	if strings.Contains(cli, "Vandermolen") || !strings.Contains(cli, "esjet:erased") {
		t.Errorf("esjet events after the forget:\n%s", cli)
	}
	// The views refill from the log: her document is gone, her trips
	// counted under the anonymous traveler; the other's document stays.
	var last string
	deadline := time.Now().Add(30 * time.Second)
	for {
		hers, found := viewDoc(t, n, "traveler_spend/Quintessa_Vandermolen")
		anon, ok := viewDoc(t, n, "traveler_spend/_")
		otto, ok2 := viewDoc(t, n, "traveler_spend/Otto_Kontrollmann")
		if !found && ok && strings.Contains(anon, `"confirmed":2`) && ok2 && strings.Contains(otto, `"confirmed":1`) {
			break
		}
		last = fmt.Sprintf("hers %v %s; anonymous %v %s; other's %v %s", found, hers, ok, anon, ok2, otto)
		if time.Now().After(deadline) {
			t.Fatalf("traveler_spend after the forget: %s", last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		doc, ok := viewDoc(t, n, "trips_by_status/trip/q1")
		return ok && strings.Contains(doc, `"traveler":""`) && strings.Contains(doc, `"status":"confirmed"`)
	})
	settledReconcile(t, n.natsURL)

	archive := filepath.Join(dir, "after.esjet-backup.gz")
	runCLI(t, dir, "backup", "--url", n.natsURL, "--out", archive)
	if b := gunzip(t, archive); bytes.Contains(b, []byte("Vandermolen")) || !bytes.Contains(b, []byte("KV_demo_keys")) {
		t.Errorf("the backup holds the name (%v) or lacks the keys bucket (%v)", bytes.Contains(b, []byte("Vandermolen")), !bytes.Contains(b, []byte("KV_demo_keys")))
	}
	for _, needle := range []string{"Vandermolen", "Quintessa"} {
		if f := grepTree(t, dir, "", needle); f != "" {
			t.Errorf("%q is still in %s after the forget", needle, f)
		}
	}
}

// travelerOf is the traveler in the trip's state.
func travelerOf(t *testing.T, n *node, id string) string {
	t.Helper()
	var st struct {
		State struct {
			Traveler string `json:"traveler"`
		} `json:"state"`
	}
	if code := getJSON(t, "http://"+n.httpAddr+"/v1/trip/"+id, &st); code != 200 {
		t.Fatalf("GET trip %s: %d", id, code)
	}
	return st.State.Traveler
}

// grepTree returns the first file under dir whose path contains within
// (any, for "") and whose bytes hold needle; "" for none.
func grepTree(t *testing.T, dir, within, needle string) string {
	t.Helper()
	found := ""
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a running server's staging file, gone meanwhile
		}
		if err != nil || d.IsDir() || found != "" || !strings.Contains(p, within) {
			return err
		}
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".gz") {
			b = gunzip(t, p)
		}
		if bytes.Contains(b, []byte(needle)) {
			found = p
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func gunzip(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}

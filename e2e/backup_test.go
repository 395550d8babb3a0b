package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
)

// TestBackupRestoreDrill is docs/operations.md's drill: trips settled and
// trips in flight, a backup of the live node, kill -9, the data dir wiped,
// the archive restored into it, the node started again. Every acknowledged
// trip is there and the saga finishes each; reconcile finds no drift; no
// effect done before the backup is done again (its receipt came back);
// the read models equal what they were; a second restore is refused
// without --force.
func TestBackupRestoreDrill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := demoWorkersConfig(t, "")
	env := []string{"ESJET_DEMO_SERVICES=false"}
	a := startNodeEnv(t, dir, env, "--config", cfg)
	svc := startDemoServices(t, a.natsURL)

	settled := []string{"d1", "d2", "d3"}
	for _, id := range settled {
		sendTrip(t, a, id, fmt.Sprintf(edgeTripBody, "trav-"+id))
	}
	for _, id := range settled {
		waitTrip(t, a, id, sagaTimeout, "confirmed", func(s tripState) bool { return s.Status == "confirmed" })
	}
	before := map[string]bool{} // commands whose effect was done before the backup
	for _, subj := range []string{"demo.svc.budget.lock", "demo.svc.flights.book", "demo.svc.hotels.book"} {
		for _, h := range svc.requests(t, subj) {
			if !h.Replayed && (h.Error == nil || h.Error == "") {
				before[h.CommandID] = true
			}
		}
	}
	spend := map[string]string{}
	natstest.Eventually(t, 30*time.Second, func() bool {
		for _, id := range settled {
			body, ok := viewDoc(t, a, "traveler_spend/trav-"+id)
			if !ok || !strings.Contains(body, `"confirmed":1`) {
				return false
			}
			spend[id] = body
		}
		return true
	})

	inFlight := []string{"f1", "f2", "f3", "f4"}
	for _, id := range inFlight {
		sendTrip(t, a, id, fmt.Sprintf(edgeTripBody, "trav-"+id))
	}
	archive := filepath.Join(t.TempDir(), "demo.esjet-backup.gz")
	out, stderr, code := runCLIFailEnv(t, dir, nil, "backup", "--url", a.natsURL, "--out", archive)
	if code != 0 {
		t.Fatalf("esjet backup: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(out, "DEMO_EVENTS") || !strings.Contains(stderr, "backup: DEMO_EVENTS:") {
		t.Errorf("esjet backup printed\n%s\nand on stderr\n%s\nwant each object and its progress", out, stderr)
	}

	a.kill9(t)
	_ = svc.cmd.Process.Kill()
	if err := os.RemoveAll(filepath.Join(dir, "data")); err != nil {
		t.Fatal(err)
	}

	// Restore into the node's data dir through a bare server on it.
	srv := startBareServer(t, filepath.Join(dir, "data"))
	runCLI(t, dir, "restore", archive, "--url", srv.url)
	if _, stderr, code := runCLIFailEnv(t, dir, nil, "restore", archive, "--url", srv.url); code == 0 || !strings.Contains(stderr, "--force") || !strings.Contains(stderr, "DEMO_EVENTS") {
		t.Errorf("a second restore onto the namespace: exit %d, %s; want a refusal naming the objects and --force", code, stderr)
	}
	srv.stop(t)

	b := startNodeEnv(t, dir, env, "--config", cfg)
	svc2 := startDemoServices(t, b.natsURL)
	for _, id := range append(append([]string{}, settled...), inFlight...) {
		waitTrip(t, b, id, sagaTimeout, "confirmed after the restore", func(s tripState) bool { return s.Status == "confirmed" })
		requireOnce(t, tripEvents(t, b, id), "trip_requested", "budget_locked", "flight_booked", "hotel_booked", "trip_confirmed")
	}
	settledReconcile(t, b.natsURL)
	for _, subj := range []string{"demo.svc.budget.lock", "demo.svc.flights.book", "demo.svc.hotels.book"} {
		for _, h := range svc2.requests(t, subj) {
			if before[h.CommandID] {
				t.Errorf("%s: %s was carried out before the backup and asked again after the restore (its receipt was not restored)", subj, h.CommandID)
			}
		}
	}
	for _, id := range settled {
		body, _ := viewDoc(t, b, "traveler_spend/trav-"+id)
		if body != spend[id] {
			t.Errorf("traveler_spend of trav-%s after the restore:\n%s\nbefore:\n%s", id, body, spend[id])
		}
	}
}

// viewDoc reads a view's document through the node's HTTP API: its value
// (a bucket's revisions are its own: a restore does not keep them).
func viewDoc(t *testing.T, n *node, path string) (string, bool) {
	t.Helper()
	resp, err := httpClient.Get("http://" + n.httpAddr + "/v1/views/" + path)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	var doc struct {
		Value json.RawMessage `json:"value"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&doc) != nil {
		return "", false
	}
	return string(doc.Value), true
}

// bareServer is an `esjet server` child process.
type bareServer struct {
	cmd  *exec.Cmd
	url  string
	done chan error
}

func startBareServer(t *testing.T, store string) *bareServer {
	t.Helper()
	cmd := exec.Command(binary, "server", "--store-dir", store, "--listen", freeAddr(t), "--sync", "interval")
	cmd.Env = cleanEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr natstest.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &bareServer{cmd: cmd, done: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if i := strings.Index(sc.Text(), "client "); i >= 0 && strings.Contains(sc.Text(), "nats server ready") {
				ready <- strings.TrimSuffix(strings.Fields(sc.Text()[i+len("client "):])[0], ",")
			}
		}
	}()
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	select {
	case s.url = <-ready:
		return s
	case err := <-s.done:
		t.Fatalf("esjet server exited (%v):\n%s", err, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("esjet server not ready within 60s:\n%s", stderr.String())
	}
	return nil
}

func (s *bareServer) stop(t *testing.T) {
	t.Helper()
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		t.Fatal("esjet server still running 30s after SIGINT")
	}
}

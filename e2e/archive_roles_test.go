package e2e

// Issue 34, archiving as a non-admin: a node of the node role with
// archive.every set may not purge EVENTS, so it must not archive (nor
// append a tombstone it could not purge below): it says so in /readyz and
// its log, and the trip's history stays in the log. An operator's and a
// client's `esjet archive run` are refused, and purge nothing.

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/archive"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/wire"
)

func TestANodeRoleNodeDoesNotArchiveAndSaysSo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "esjet.yaml")
	if err := os.WriteFile(cfgFile, []byte(`nats:
  embedded:
    allow_plaintext_passwords: true
    users:
      - {name: app, password: pw-app, role: client}
      - {name: oncall, password: pw-oncall, role: operator}
archive:
  every: 2s
  types:
    trip: {closed_by: [trip_confirmed, trip_cancelled], after: 0s}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, dir, "--config", cfgFile)
	sendTrip(t, n, "lisbon", tripRequest)
	waitTrip(t, n, "lisbon", sagaTimeout, "confirmed", func(s tripState) bool { return s.Status == "confirmed" })
	before := tripHistory(t, n, "lisbon")

	var ready struct {
		Archive archive.Status `json:"archive"`
	}
	natstest.Eventually(t, time.Minute, func() bool {
		return getJSON(t, "http://"+n.httpAddr+"/readyz", &ready) == http.StatusOK && ready.Archive.NotAllowed != ""
	})
	if !strings.Contains(ready.Archive.NotAllowed, "may not purge") {
		t.Errorf("/readyz archive.not_allowed: %q", ready.Archive.NotAllowed)
	}
	// Passes keep coming every 2s; none writes anything.
	time.Sleep(5 * time.Second)
	after := tripHistory(t, n, "lisbon")
	if len(after) != len(before) {
		t.Fatalf("a node-role node's passes changed lisbon's history: %d events, were %d", len(after), len(before))
	}
	for _, e := range after {
		if strings.Contains(string(e), wire.EventArchived) {
			t.Fatalf("a node-role node appended a tombstone: %s", e)
		}
	}
	if c := strings.Count(n.stderr.String(), "may not purge the event log (only the admin role may)"); c != 1 {
		t.Errorf("the node said it may not archive %d times, want once:\n%s", c, n.stderr.String())
	}

	// An operator and a client: esjet archive run is refused.
	listen := "ESJET_NATS_EMBEDDED_LISTEN=" + n.natsListen
	for _, user := range [][2]string{{"oncall", "pw-oncall"}, {"app", "pw-app"}} {
		env := []string{listen, "ESJET_NATS_EMBEDDED_AUTH_USER=" + user[0], "ESJET_NATS_EMBEDDED_AUTH_PASSWORD=" + user[1]}
		out, stderr, code := runCLIFailEnv(t, dir, env, "--config", cfgFile, "archive", "run")
		if code == 0 || strings.Contains(out, "archived 1") {
			t.Errorf("esjet archive run as %s: exit %d\n%s%s", user[0], code, out, stderr)
		}
		t.Logf("esjet archive run as %s: exit %d: %s", user[0], code, strings.TrimSpace(stderr))
	}
	if got := tripHistory(t, n, "lisbon"); len(got) != len(before) {
		t.Fatalf("after the operator's and client's archive runs lisbon has %d events, had %d", len(got), len(before))
	}
	n.stop(t, syscall.SIGTERM)
}

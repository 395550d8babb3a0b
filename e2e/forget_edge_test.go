package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
)

// TestForgetEdgeHubHoldsNoName: a site's trips reach its hub sealed, so
// the hub's store never holds the traveler's name, and after a forget at
// the site neither does the site's (issue 34's done-when, edge part). The
// fleet has no hub kinds: a hub kind's payload stays in plaintext (the hub
// has no keys), see docs/personal-data.md.
func TestForgetEdgeHubHoldsNoName(t *testing.T) {
	t.Parallel()
	leaf := freeAddr(t)
	root := t.TempDir()
	cfg := filepath.Join(root, "fleet.yaml")
	yaml := fmt.Sprintf("namespace: demo\nedge:\n  sites: [s1]\n  hub_urls: [nats-leaf://%s]\n  leaf_listen: %s\n", leaf, leaf)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &edgeFleet{t: t, cfg: cfg, sites: map[string]*node{}, dirs: map[string]string{}}
	for _, p := range []string{"hub", "s1"} {
		f.dirs[p] = filepath.Join(root, p)
		if err := os.MkdirAll(f.dirs[p], 0o750); err != nil {
			t.Fatal(err)
		}
	}
	f.startHub("s1")
	f.startSite("s1")
	site := f.sites["s1"]
	const name = "Quintessa Edgeworth"
	sendTrip(t, site, "s1-e1", fmt.Sprintf(edgeTripBody, name))
	waitTrip(t, site, "s1-e1", sagaTimeout, "confirmed at its site", func(s tripState) bool { return s.Status == "confirmed" })
	if got := travelerOf(t, site, "s1-e1"); got != name {
		t.Fatalf("site reads traveler %q", got)
	}
	natstest.Eventually(t, 60*time.Second, func() bool {
		return subjects(t, f.hub)["demo.evt.trip.s1-e1"] == subjects(t, site)["demo.evt.trip.s1-e1"]
	})
	if f := grepTree(t, f.dirs["hub"], "", "Edgeworth"); f != "" {
		t.Fatalf("the hub's store holds the traveler's name in %s", f)
	}
	if f := grepTree(t, f.dirs["hub"], "", "esjet:sealed"); f == "" {
		t.Fatal("the hub's store holds no sealed value: did the trip reach it?")
	}
	// The hub reads the site's trip without the name (it has no keys).
	if got := travelerOf(t, f.hub, "s1-e1"); got != "" {
		t.Errorf("the hub reads traveler %q", got)
	}
	runCLI(t, f.dirs["s1"], "forget", name, "--url", site.natsURL)
	if got := travelerOf(t, site, "s1-e1"); got != "" {
		t.Errorf("site reads traveler %q after the forget", got)
	}
	for _, p := range []string{"hub", "s1"} {
		if f := grepTree(t, f.dirs[p], "", "Edgeworth"); f != "" {
			t.Errorf("after the forget the %s's store holds the traveler's name in %s", p, f)
		}
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestPermissionsOfAHubListItsLeafUsersAsValidServerConfig pins that
// `esjet permissions` at a hub prints its sites' leaf users in the leaf
// account (ESJET_<NS>_LEAF, no JetStream), in a form nats-server reads: allowed only leaf connections,
// each with its own site's outcome pull and nothing of another site's.
func TestPermissionsOfAHubListItsLeafUsersAsValidServerConfig(t *testing.T) {
	env := []string{"ESJET_EDGE_ROLE=hub", "ESJET_EDGE_SITES=s1,s2"}
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"permissions", "--namespace", "fleet"}, env, &stdout, &stderr); err != nil {
		t.Fatalf("permissions: %v\n%s", err, stderr.String())
	}
	for _, m := range regexp.MustCompile(`(?m)^#\s+(ESJET_\w+_PASSWORD)`).FindAllStringSubmatch(stdout.String(), -1) {
		t.Setenv(m[1], "$2a$11$abcdefghijklmnopqrstuuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0")
	}
	path := filepath.Join(t.TempDir(), "auth.conf")
	if err := os.WriteFile(path, stdout.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats-server does not read the printed config: %v\n%s", err, stdout.String())
	}
	leaf := map[string]*server.User{}
	for _, u := range opts.Users {
		if _, ok := u.AllowedConnectionTypes["LEAFNODE"]; ok {
			leaf[u.Username] = u
		}
	}
	if len(leaf) != 2 || leaf["s1"] == nil || leaf["s2"] == nil {
		t.Fatalf("leaf users in the printed config: %v, want s1 and s2", leaf)
	}
	if a := leaf["s1"].Account; a == nil || a.Name != "ESJET_FLEET_LEAF" {
		t.Errorf("the leaf user s1 is in account %v, want ESJET_FLEET_LEAF (apart from esjet's streams)", a)
	}
	if _, ok := leaf["s1"].AllowedConnectionTypes["STANDARD"]; ok {
		t.Errorf("the leaf user s1 may connect as a client")
	}
	pub := leaf["s1"].Permissions.Publish.Allow
	if !slices.Contains(pub, "esjet-edge.fleet.hub.API.CONSUMER.MSG.NEXT.FLEET_OUTCOMES.esjet_site_s1") || slices.Contains(pub, "esjet-edge.fleet.hub.API.CONSUMER.MSG.NEXT.FLEET_OUTCOMES.esjet_site_s2") {
		t.Errorf("s1 may publish %v", pub)
	}

	stdout.Reset()
	if err := run(t.Context(), []string{"permissions", "--namespace", "fleet", "--format", "json"}, env, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	var out permissionsJSON
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.LeafUsers) != 2 || out.LeafUsers[1].User != "s2" || !slices.Equal(out.LeafUsers[1].Sites, []string{"s2"}) {
		t.Errorf("json leaf users: %+v", out.LeafUsers)
	}
}

package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fleetFile is one file for a hub and its sites: the edge block serves
// them all, and each process adds its role (and a site its id).
const fleetFile = `namespace: shops
demo: {services: false}
edge:
  hub_domain: hub
  sites: [shop1, shop2]
  hub_kinds: [charge]
  owners:
    - {site: shop1, types: [till]}
  hub_urls: [nats-leaf://127.0.0.1:7422]
  leaf_listen: 127.0.0.1:7422
  leaf_users:
    - {site: shop1, password: "$2a$11$0123456789012345678901234567890123456789012345678901"}
    - {site: shop2, password: "$2a$11$0123456789012345678901234567890123456789012345678902"}
`

// The hub, each site and every tool (esjet sites, events…) take the same
// file; only a node started without a role refuses its edge block.
func TestOneFleetFileServesHubSitesAndTools(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte(fleetFile), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"hub", []string{"ESJET_EDGE_ROLE=hub"}},
		{"site", []string{"ESJET_EDGE_ROLE=site", "ESJET_EDGE_SITE=shop1", "ESJET_EDGE_AUTH_USER=shop1", "ESJET_EDGE_AUTH_PASSWORD=secret"}},
	} {
		cfg, err := Load(path, tc.env)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if cfg.Namespace != "shops" {
			t.Errorf("%s: namespace %q", tc.name, cfg.Namespace)
		}
	}
	cfg, err := Load(path, nil)
	if err == nil {
		t.Error("a node without edge.role took the fleet's edge block")
	} else if !strings.Contains(err.Error(), "ESJET_EDGE_ROLE") {
		t.Errorf("node without a role: %v; want it to name ESJET_EDGE_ROLE", err)
	}
	if err := cfg.ValidateTool(); err != nil {
		t.Errorf("a tool (esjet sites --config fleet.yaml) refused the fleet file: %v", err)
	}
}

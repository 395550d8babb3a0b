package broker

import (
	"slices"
	"testing"

	"github.com/esjet/esjet/config"
)

// TestEdgeNodeRoleReachesTheOtherSideOfTheLink pins the node role's
// permissions in a fleet with users: a site may ask the hub's JetStream
// (its outcomes, on esjet-edge.<ns>.hub.API), the hub may write OUTCOMES, read each site's streams' info and make its
// staging streams.
func TestEdgeNodeRoleReachesTheOtherSideOfTheLink(t *testing.T) {
	cfg := config.Default()
	cfg.Edge.Role, cfg.Edge.Site = config.EdgeSite, "s1"
	site, err := RolePermissions(RoleNode, NodeSpec(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(site.Publish.Allow, "esjet-edge.demo.hub.API.>") || slices.Contains(site.Publish.Allow, "$JS.hub.API.>") {
		t.Errorf("a site's node role may not publish to esjet-edge.demo.hub.API.> (or may to $JS.hub.API.>): %v", site.Publish.Allow)
	}
	cfg.Edge.Role, cfg.Edge.Site, cfg.Edge.Sites = config.EdgeHub, "", []string{"s1", "s2"}
	hub, err := RolePermissions(RoleNode, NodeSpec(cfg))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"demo.outcome.>", "$JS.s2.API.STREAM.INFO.DEMO_EVENTS", "esjet-edge.demo.stage.s2.API.>", "$JS.API.STREAM.INFO.DEMO_OUTCOMES"} {
		if !slices.Contains(hub.Publish.Allow, want) {
			t.Errorf("the hub's node role may not publish to %s", want)
		}
	}
	if slices.Contains(hub.Publish.Allow, "$JS.s2.API.>") {
		t.Errorf("the hub's node role may make any request of a site's JetStream: its sources are the staging accounts'")
	}
	if !slices.Contains(hub.Subscribe.Allow, "esjet-edge.demo.sites") {
		t.Errorf("the hub's node role may not serve esjet sites: %v", hub.Subscribe.Allow)
	}
}

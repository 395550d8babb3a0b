package config

import (
	"strings"
	"testing"
)

func TestEdgeSiteAndHubAreValidatedWithEveryProblemNamed(t *testing.T) {
	c := Default()
	c.Edge.Role = EdgeSite
	c.Edge.Site = "Shop 1"
	c.NATS.Embedded.ServerName = "other"
	c.Edge.HubURLs = []string{"http://hub:7422"}
	err := c.Validate()
	for _, want := range []string{
		`edge.site: "Shop 1" is not valid`,
		`nats.embedded.server_name: "other" is not valid`,
		`edge.hub_urls[0]: "http://hub:7422" is not valid: use the scheme nats-leaf`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("site config error %v\ndoes not say %q", err, want)
		}
	}

	h := Default()
	h.Edge.Role = EdgeHub
	h.Edge.LeafListen = "0.0.0.0:7422"
	h.Edge.Owners = []Owner{{Site: "shop9"}}
	err = h.Validate()
	for _, want := range []string{
		"edge.sites: the hub needs the ids of the sites",
		`edge.owners[0].site: "shop9" is not valid: is not in edge.sites`,
		`edge.leaf_listen: "0.0.0.0:7422" is not valid: a leaf listener beyond loopback needs edge.leaf_users`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("hub config error %v\ndoes not say %q", err, want)
		}
	}

	none := Default()
	none.Edge.Owners = []Owner{{Site: "shop1", Types: []string{"trip"}}}
	if err := none.Validate(); err == nil || !strings.Contains(err.Error(), "edge.owners") || !strings.Contains(err.Error(), "without edge.role") {
		t.Errorf("owners without a role: %v, want an error naming edge.owners and edge.role", err)
	}

	ok := Default()
	ok.Edge.Role, ok.Edge.Site, ok.Edge.HubURLs = EdgeSite, "shop1", []string{"nats-leaf://127.0.0.1:7422"}
	if err := ok.Validate(); err != nil {
		t.Errorf("a minimal site config: %v", err)
	}
	// A fleet's shared file lists the sites: a site it does not list would
	// start "ready" and be refused by the hub's leaf listener forever.
	ok.Edge.Sites = []string{"shop1", "shop2"}
	if err := ok.Validate(); err != nil {
		t.Errorf("a listed site: %v", err)
	}
	ok.Edge.Site = "shop3"
	if err := ok.Validate(); err == nil || !strings.Contains(err.Error(), `edge.site: "shop3" is not valid: is not in edge.sites [shop1 shop2]`) {
		t.Errorf("a site the fleet file does not list: %v, want it refused naming edge.sites", err)
	}
}

func TestEdgeOwnerIsTheFirstMatchingRuleElseTheSitePrefix(t *testing.T) {
	e := DefaultEdge()
	e.Sites = []string{"shop1", "shop2"}
	e.Owners = []Owner{{Site: "shop2", Types: []string{"till"}}, {Site: "shop1", IDPrefix: "S1"}}
	for _, c := range []struct{ typ, id, want string }{
		{"till", "shop1-1", "shop2"}, // the type rule comes first
		{"order", "S1x", "shop1"},
		{"order", "shop2-7", "shop2"}, // no rule: the site prefix
		{"order", "shop3-7", ""},      // not a site
		{"order", "plain", ""},
	} {
		if got := e.OwnerOf(c.typ, c.id); got != c.want {
			t.Errorf("OwnerOf(%s, %s) = %q, want %q", c.typ, c.id, got, c.want)
		}
	}
}

func TestEdgeLeafUsersNameEverySiteOnceWithABcryptHash(t *testing.T) {
	const hash = "$2a$11$abcdefghijklmnopqrstuuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0"
	h := Default()
	h.Edge.Role, h.Edge.Sites = EdgeHub, []string{"shop1", "shop2", "shop3"}
	h.Edge.Auth = Auth{User: "fleet", Password: "x"}
	h.NATS.Embedded.Auth.Token = "tok"
	h.Edge.LeafUsers = []LeafUser{
		{Site: "shop1", Password: hash},
		{Site: "shop1", User: "other", Password: hash},
		{Site: "shop9", User: "shop1", Password: hash},
		{Site: "shop2", Password: "plain"},
	}
	err := h.Validate()
	for _, want := range []string{
		"edge.auth: the hub with edge.leaf_users authenticates each site as its own user",
		`edge.leaf_users[1].site: "shop1" is not valid: has two leaf users`,
		`edge.leaf_users[2].site: "shop9" is not valid: is not in edge.sites`,
		`edge.leaf_users[2].user: "shop1" is not valid: is another site's user name`,
		"edge.leaf_users[3].password",
		`site "shop3" has no leaf user`,
		"nats.embedded.auth.token",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("hub config error %v\ndoes not say %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), `"plain"`) {
		t.Errorf("the error shows a password: %v", err)
	}

	ok := Default()
	ok.Edge.Role, ok.Edge.Sites, ok.Edge.LeafListen = EdgeHub, []string{"shop1", "shop2"}, "0.0.0.0:7422"
	ok.Edge.TLS = TLS{CertFile: "hub.pem", KeyFile: "hub-key.pem"}
	ok.Edge.LeafUsers = []LeafUser{{Site: "shop1", Password: hash}, {Site: "shop2", User: "s2", Password: hash}}
	if err := ok.Validate(); err != nil {
		t.Errorf("a hub with a leaf user per site: %v", err)
	}
	if got := ok.Edge.LeafUsers[0].Name(); got != "shop1" {
		t.Errorf("a leaf user without a name is named %q, want its site id", got)
	}
}

// A site without its id is told the id is required, and where it comes
// from, not that "" breaks the id's character rule.
func TestEdgeSiteWithoutAnIDSaysItIsRequired(t *testing.T) {
	c := Default()
	c.Edge.Role, c.Edge.HubURLs = EdgeSite, []string{"nats-leaf://127.0.0.1:7422"}
	err := c.Validate()
	for _, want := range []string{"edge.site: the site role needs the site's id", "ESJET_EDGE_SITE", "edge.site in the config"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a site without an id: %v\ndoes not say %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), `"" is not valid`) {
		t.Errorf("a site without an id: %v; want no character rule for an empty id", err)
	}
}

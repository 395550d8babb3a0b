package broker

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/bcrypt"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/natstest"
)

func hubConfig(t *testing.T) config.Config {
	t.Helper()
	cfg := embeddedConfig(t, "127.0.0.1:0")
	cfg.Namespace = "fleet"
	cfg.Edge.Role, cfg.Edge.Sites, cfg.Edge.LeafListen = config.EdgeHub, []string{"s1", "s2"}, "127.0.0.1:0"
	return cfg
}

// TestLeafPermissionsAreTheSitesOwnAndNoMore pins what a site's leaf user
// may do, from the hub's point of view: into the hub, its own outcome
// consumer's lookup, pulls and acks, its own sourcing deliveries and
// replies, never a wildcard over the hub's API nor another site's
// consumer; to the site, its own domain's API, flow control and inbox,
// never another site's.
func TestLeafPermissionsAreTheSitesOwnAndNoMore(t *testing.T) {
	cfg := hubConfig(t)
	p := LeafPermissions(cfg, "s1")
	for _, want := range []string{
		"esjet-edge.fleet.hub.API.CONSUMER.INFO.FLEET_OUTCOMES.esjet_site_s1",
		"esjet-edge.fleet.hub.API.CONSUMER.MSG.NEXT.FLEET_OUTCOMES.esjet_site_s1",
		"_R_.>",
		"$JS.ACK.FLEET_OUTCOMES.esjet_site_s1.>",
		"esjet-edge.fleet.src.s1.>",
	} {
		if !slices.Contains(p.Publish.Allow, want) {
			t.Errorf("s1 may not send %s into the hub: %v", want, p.Publish.Allow)
		}
	}
	for _, s := range p.Publish.Allow {
		if strings.Contains(s, "s2") || strings.HasPrefix(s, "$JS.hub.API") || strings.HasPrefix(s, "$JSC") || strings.HasPrefix(s, "_INBOX") || strings.Contains(s, "CREATE") || strings.Contains(s, "DELETE") || strings.Contains(s, "DIRECT") || strings.HasPrefix(s, "fleet.") {
			t.Errorf("s1 may send %s into the hub", s)
		}
	}
	for _, want := range []string{"$JS.s1.API.CONSUMER.CREATE.FLEET_EVENTS.>", "$JS.s1.API.STREAM.INFO.FLEET_EVENTS", "_INBOX_fleet_node.s1.>", "$JS.FC.FLEET_EVENTS.>"} {
		if !slices.Contains(p.Subscribe.Allow, want) {
			t.Errorf("the hub may not send %s to s1: %v", want, p.Subscribe.Allow)
		}
	}
	for _, s := range p.Subscribe.Allow {
		if strings.Contains(s, "s2") || strings.Contains(s, "hub") || s == "_INBOX_fleet_node.>" || strings.HasSuffix(s, "API.>") || strings.Contains(s, "STREAM.DELETE") || strings.Contains(s, "DIRECT") {
			t.Errorf("the hub may send %s to s1", s)
		}
	}
}

// TestLeafUsersPerSiteSharedOrNamedBySiteID pins the three ways a hub
// knows its sites: edge.leaf_users (each its own user), a shared
// edge.auth (one user, the union of the sites' permissions), neither (a
// user per site id, without a password).
func TestLeafUsersPerSiteSharedOrNamedBySiteID(t *testing.T) {
	cfg := hubConfig(t)
	users := LeafUsers(cfg)
	if len(users) != 2 || users[0].Name != "s1" || users[0].Password != "" || !slices.Equal(users[1].Sites, []string{"s2"}) {
		t.Errorf("loopback hub's leaf users: %+v, want s1 and s2 without passwords", users)
	}
	cfg.Edge.Auth = config.Auth{User: "fleet", Password: "pw"}
	users = LeafUsers(cfg)
	if len(users) != 1 || users[0].Name != "fleet" || !slices.Contains(users[0].Permissions.Publish.Allow, "esjet-edge.fleet.hub.API.CONSUMER.MSG.NEXT.FLEET_OUTCOMES.esjet_site_s2") {
		t.Errorf("shared edge.auth: %+v, want one user with both sites' pulls", users)
	}
	cfg.Edge.Auth = config.Auth{}
	cfg.Edge.LeafUsers = []config.LeafUser{{Site: "s1", User: "shop-one", Password: "$2a$11$x"}, {Site: "s2", Password: "$2a$11$y"}}
	users = LeafUsers(cfg)
	if len(users) != 2 || users[0].Name != "shop-one" || users[0].Password != "$2a$11$x" || users[1].Name != "s2" ||
		slices.Contains(users[0].Permissions.Publish.Allow, "esjet-edge.fleet.hub.API.CONSUMER.MSG.NEXT.FLEET_OUTCOMES.esjet_site_s2") {
		t.Errorf("edge.leaf_users: %+v, want each site its own user and permissions", users)
	}
	cfg.Edge.Role = config.EdgeSite
	if users := LeafUsers(cfg); users != nil {
		t.Errorf("a site has leaf users: %+v", users)
	}
}

// TestHubLeafListenerAuthenticatesEachSite runs a hub with a leaf user
// per site and two sites: the one with its own password connects, the one
// with a wrong password does not; a client without credentials still
// uses the hub as before (the no-users quickstart), and cannot connect as
// a site's user on the client port.
func TestHubLeafListenerAuthenticatesEachSite(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s1-pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := hubConfig(t)
	cfg.Edge.LeafUsers = []config.LeafUser{{Site: "s1", Password: string(hash)}, {Site: "s2", Password: string(hash)}}
	hub := start(t, cfg)
	site := func(id, password string) *Broker {
		s := embeddedConfig(t, config.ListenNone)
		s.Namespace = "fleet"
		s.Edge.Role, s.Edge.Site, s.Edge.HubURLs = config.EdgeSite, id, []string{hub.LeafURL()}
		s.Edge.Auth = config.Auth{User: id, Password: password}
		return start(t, s)
	}
	s1 := site("s1", "s1-pw")
	s2 := site("s2", "wrong")
	natstest.Eventually(t, 10*time.Second, s1.LeafConnected)
	if s2.LeafConnected() {
		t.Errorf("s2 connected with a wrong password")
	}
	if got := hub.LeafSites(); !slices.Equal(got, []string{"s1"}) {
		t.Errorf("hub's sites: %v, want s1 only", got)
	}
	nc, err := nats.Connect(hub.ClientURL())
	if err != nil {
		t.Fatalf("a client without credentials at a loopback hub: %v", err)
	}
	nc.Close()
	if nc, err := nats.Connect(hub.ClientURL(), nats.UserInfo("s1", "s1-pw")); err == nil {
		nc.Close()
		t.Errorf("a client connected to the hub's client port as a site's leaf user")
	}
}

// TestHubWithClientAuthKeepsItBesideTheSharedLeafUser pins a hub whose
// clients authenticate (nats.embedded.auth) and whose sites share one
// edge.auth: the client user still works and is the only way in for
// clients; the shared leaf user carries a site and is refused as a client.
func TestHubWithClientAuthKeepsItBesideTheSharedLeafUser(t *testing.T) {
	cfg := hubConfig(t)
	cfg.NATS.Embedded.Auth = config.Auth{User: "app", Password: "app-pw"}
	cfg.Edge.Auth = config.Auth{User: "fleet", Password: "fleet-pw"}
	hub := start(t, cfg)
	s := embeddedConfig(t, config.ListenNone)
	s.Namespace = "fleet"
	s.Edge.Role, s.Edge.Site, s.Edge.HubURLs, s.Edge.Auth = config.EdgeSite, "s2", []string{hub.LeafURL()}, cfg.Edge.Auth
	site := start(t, s)
	natstest.Eventually(t, 10*time.Second, site.LeafConnected)
	nc, err := nats.Connect(hub.ClientURL(), nats.UserInfo("app", "app-pw"))
	if err != nil {
		t.Fatalf("the hub's client user: %v", err)
	}
	nc.Close()
	for _, o := range []nats.Option{nats.UserInfo("fleet", "fleet-pw"), nats.Name("no credentials")} {
		if nc, err := nats.Connect(hub.ClientURL(), o); err == nil {
			nc.Close()
			t.Errorf("a client connected to a hub with client auth without the client user")
		}
	}
}

// TestLeafAccountHoldsNoStreamsAndImportsOnlyTheOutcomePull pins the
// hub's leaf account: no JetStream, the leaf users and nothing else, and
// between it and the account of the hub's streams only what the outcome
// pull needs: the leaf account imports each site's outcome consumer's
// INFO, MSG.NEXT and acks (INFO and MSG.NEXT asked on
// esjet-edge.<ns>.hub.API, never $JS.API, which the server answers in an
// account without JetStream too). Sourcing goes through one staging account
// per site, with JetStream: it imports from the leaf account only that
// site's sourcing requests, flow control replies and deliveries; the
// streams account imports from it only its staging streams' requests
// (under esjet-edge.<ns>.stage.<site>.API), flow control replies and
// deliveries, and from the leaf account only the sites' stream info. With no
// namespace account (a hub without users) the streams are in $G.
func TestLeafAccountHoldsNoStreamsAndImportsOnlyTheOutcomePull(t *testing.T) {
	cfg := hubConfig(t)
	for _, users := range []bool{false, true} {
		var in []Account
		streams := "$G"
		if users {
			in, streams = []Account{{Name: "ESJET_FLEET", JetStream: true}}, "ESJET_FLEET"
		}
		accounts, err := WithLeafAccount(in, cfg, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(accounts) != 4 || accounts[0].Name != streams || !accounts[0].JetStream || accounts[1].Name != "ESJET_FLEET_LEAF" || accounts[1].JetStream ||
			accounts[2].Name != "ESJET_FLEET_SITE_S1" || !accounts[2].JetStream || accounts[3].Name != "ESJET_FLEET_SITE_S2" || len(accounts[2].Users) > 0 {
			t.Fatalf("accounts: %+v", accounts)
		}
		leaf := accounts[1]
		if len(leaf.Users) != 2 || leaf.Users[0].Name != "s1" || !slices.Equal(leaf.Users[0].ConnectionTypes, []string{"LEAFNODE", "LEAFNODE_WS"}) {
			t.Errorf("leaf users: %+v", leaf.Users)
		}
		for _, im := range leaf.Imports {
			ok := strings.HasPrefix(im.Subject, "$JS.ACK.FLEET_OUTCOMES.esjet_site_") || strings.HasPrefix(im.Subject, "$JS.ACK.hub.*.FLEET_OUTCOMES.esjet_site_") ||
				(strings.HasPrefix(im.Subject, "$JS.API.CONSUMER.") && strings.Contains(im.Subject, ".FLEET_OUTCOMES.esjet_site_") && strings.HasPrefix(im.To, "esjet-edge.fleet.hub.API.CONSUMER."))
			if !ok || im.From != streams {
				t.Errorf("the leaf account imports %+v", im)
			}
		}
		for _, im := range accounts[0].Imports {
			var ok bool
			switch im.From {
			case "ESJET_FLEET_LEAF":
				ok = strings.HasPrefix(im.Subject, "$JS.s1.API.STREAM.INFO.") || strings.HasPrefix(im.Subject, "$JS.s2.API.STREAM.INFO.")
			case "ESJET_FLEET_SITE_S1", "ESJET_FLEET_SITE_S2":
				site := strings.ToLower(strings.TrimPrefix(im.From, "ESJET_FLEET_SITE_"))
				stage := "FLEET_SITE_" + strings.ToUpper(site) + "_"
				ok = strings.HasPrefix(im.Subject, "$JS.FC."+stage) ||
					(im.Messages && strings.HasPrefix(im.Subject, "esjet-edge.fleet.staged."+site+".")) ||
					(strings.HasPrefix(im.Subject, "$JS.API.") && strings.Contains(im.Subject, "."+stage) && im.To == "esjet-edge.fleet.stage."+site+".API."+strings.TrimPrefix(im.Subject, "$JS.API."))
			}
			if !ok || strings.Contains(im.Subject, "DELETE.FLEET_EVENTS.>") || strings.Contains(im.Subject, "STREAM.DELETE") || strings.HasSuffix(im.Subject, "API.>") {
				t.Errorf("the streams account imports %+v", im)
			}
		}
		for _, stage := range accounts[2:] {
			site := strings.ToLower(strings.TrimPrefix(stage.Name, "ESJET_FLEET_SITE_"))
			for _, im := range stage.Imports {
				ok := strings.HasPrefix(im.Subject, "$JS."+site+".API.") || strings.HasPrefix(im.Subject, "$JS.FC.FLEET_") ||
					(im.Messages && strings.HasPrefix(im.Subject, "esjet-edge.fleet.src."+site+"."))
				if !ok || im.From != "ESJET_FLEET_LEAF" || strings.HasSuffix(im.Subject, "API.>") {
					t.Errorf("staging account %s imports %+v", stage.Name, im)
				}
			}
		}
		if users {
			parsed := &server.Options{}
			if err := parsed.ProcessConfigString(ServerAccounts(accounts)); err != nil {
				t.Fatalf("nats-server does not read the leaf account: %v\n%s", err, ServerAccounts(accounts))
			}
		}
	}
	// A hub without users: $G keeps the streams, the leaf users go to the
	// leaf account.
	opts := &server.Options{}
	if err := addLeafUsers(cfg, opts); err != nil {
		t.Fatal(err)
	}
	for _, u := range opts.Users {
		if _, leaf := u.AllowedConnectionTypes["LEAFNODE"]; leaf != (u.Account != nil && u.Account.Name == "ESJET_FLEET_LEAF") {
			t.Errorf("user %s in account %v (leaf connections: %v)", u.Username, u.Account, leaf)
		}
	}
}

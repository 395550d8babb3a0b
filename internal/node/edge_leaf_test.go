package node

import (
	"bytes"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/bcrypt"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// startFleet starts a hub of sites s1 and s2 and both sites, each with a
// loopback client listener and no users (the default): anyone on the
// machine is a client of its NATS.
func startFleet(t *testing.T, tune func(role string, cfg *config.Config)) (hub *Node, sites map[string]*Node) {
	t.Helper()
	defs := []*aggregate.Definition{orderDefinition()}
	var charged, shipped atomic.Int64
	hubCfg := edgeConfig(t, config.EdgeHub)
	hubCfg.NATS.Embedded.Listen = "127.0.0.1:0"
	if tune != nil {
		tune(config.EdgeHub, &hubCfg)
	}
	hub = startTestNode(t, hubCfg, Options{Aggregates: defs,
		Handlers: map[string]consumer.Handler{"charge": countingHandler(&charged)}})
	sites = map[string]*Node{}
	for _, id := range []string{"s1", "s2"} {
		cfg := edgeConfig(t, config.EdgeSite)
		cfg.Edge.Site, cfg.Edge.HubURLs = id, []string{hub.Broker().LeafURL()}
		cfg.NATS.Embedded.Listen = "127.0.0.1:0"
		if tune != nil {
			tune(id, &cfg)
		}
		sites[id] = startTestNode(t, cfg, Options{Aggregates: defs,
			Handlers: map[string]consumer.Handler{"ship": countingHandler(&shipped)}})
	}
	return hub, sites
}

// snoop collects what a subscription on a site's local NATS receives.
type snoop struct {
	mu   sync.Mutex
	msgs []*nats.Msg
}

func (s *snoop) add(m *nats.Msg) { s.mu.Lock(); s.msgs = append(s.msgs, m); s.mu.Unlock() }

func (s *snoop) all() []*nats.Msg {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*nats.Msg(nil), s.msgs...)
}

func subscribe(t *testing.T, nc *nats.Conn, subject string) *snoop {
	t.Helper()
	s := &snoop{}
	if _, err := nc.Subscribe(subject, s.add); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return s
}

func connectLocal(t *testing.T, n *Node) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(n.Broker().ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestEdgeSiteLocalClientCannotReachTheHubOrAnotherSite pins issue 26's
// leaf attack: a process on a site's local NATS (no users, the default)
// asks across the leaf link for the hub's log (DIRECT.GET), its stream
// info, its deletion, another site's outcomes consumer, and another site's
// JetStream; every request is refused, and the hub's log and the other
// site's log are whole afterwards. It also listens across the link: it
// hears neither the hub's requests to the other site nor the other site's
// replies (its outcomes). The site's own outcome consumer stays reachable:
// the link still does its job (and a process at a site can read that
// site's own outcomes, which are its data).
func TestEdgeSiteLocalClientCannotReachTheHubOrAnotherSite(t *testing.T) {
	hub, sites := startFleet(t, nil)
	names := streams.NamesFor("fleet")
	attacker := connectLocal(t, sites["s1"])
	// Listen at s1 for anything of s2's crossing the link, and at s2 (its
	// own NATS, where $JS.s2.API.> arrives mapped to $JS.API.>) for the
	// hub's requests to it, the control.
	overheard := subscribe(t, attacker, ">")
	control := subscribe(t, connectLocal(t, sites["s2"]), "$JS.API.STREAM.INFO."+names.Events)
	fromHub := func() (n int) {
		for _, m := range control.all() {
			if !strings.HasPrefix(m.Reply, "_INBOX_fleet_node.s2.") {
				n++
			}
		}
		return n
	}

	for id, s := range sites {
		if _, err := s.API().Send(t.Context(), "order", id+"-o1", "place", []byte(`{}`), api.Meta{}); err != nil {
			t.Fatalf("place %s-o1: %v", id, err)
		}
	}
	// place, ship_done, charge_done at each site: the outcome came back.
	for _, s := range sites {
		natstest.Eventually(t, 60*time.Second, func() bool { return streamMsgs(t, s.JetStream(), names.Events) == 3 })
	}
	natstest.Eventually(t, 60*time.Second, func() bool { return streamMsgs(t, hub.JetStream(), names.Events) == 6 })
	natstest.Eventually(t, 30*time.Second, func() bool { return fromHub() >= 2 })
	for _, m := range overheard.all() {
		if strings.HasPrefix(m.Subject, "$JS.s2.") || strings.Contains(m.Subject, ".s2.") || bytes.Contains(m.Data, []byte("s2-o1")) {
			t.Errorf("a client at s1 overheard s2's traffic across the link: %s %.200s", m.Subject, m.Data)
		}
	}

	refused := []string{
		"$JS.hub.API.DIRECT.GET." + names.Events,
		"$JS.hub.API.DIRECT.GET." + names.Outcomes(),
		"$JS.hub.API.STREAM.INFO." + names.Events,
		"$JS.hub.API.STREAM.DELETE." + names.Events,
		"$JS.hub.API.STREAM.PURGE." + names.Outcomes(),
		"$JS.hub.API.STREAM.UPDATE." + names.Events,
		"$JS.hub.API.CONSUMER.CREATE." + names.Events + ".x",
		"$JS.hub.API.CONSUMER.INFO." + names.Outcomes() + ".esjet_site_s2",
		"$JS.hub.API.CONSUMER.MSG.NEXT." + names.Outcomes() + ".esjet_site_s2",
		// s1's own consumer too: a site pulls on esjet-edge.<ns>.hub.API,
		// which only the leaf account's imports serve.
		"$JS.hub.API.CONSUMER.INFO." + names.Outcomes() + ".esjet_site_s1",
		"esjet-edge.fleet.hub.API.CONSUMER.INFO." + names.Outcomes() + ".esjet_site_s2",
		"esjet-edge.fleet.hub.API.CONSUMER.MSG.NEXT." + names.Outcomes() + ".esjet_site_s2",
		"esjet-edge.fleet.hub.API.STREAM.INFO." + names.Outcomes(),
		"$JS.hub.API.CONSUMER.DELETE." + names.Outcomes() + ".esjet_site_s1",
		"$JS.hub.API.INFO",
		"$JS.s2.API.INFO",
		"$JS.s2.API.DIRECT.GET." + names.Events,
		"$JS.s2.API.STREAM.DELETE." + names.Events,
		"fleet.outcome.s1",
	}
	for _, subj := range refused {
		var body []byte // what STREAM.DELETE, INFO and the like take
		switch {
		case strings.Contains(subj, "DIRECT.GET"):
			body = []byte(`{"seq":1}`)
		case strings.Contains(subj, "MSG.NEXT"):
			body = []byte(`{"batch":1,"expires":500000000}`)
		}
		if m, err := attacker.Request(subj, body, time.Second); err == nil {
			t.Errorf("a client at s1 asked %s across the link and got an answer: %s %.200s", subj, m.Header, m.Data)
		}
	}
	// The link does its job: s1's own consumer answers (to the s1 node's
	// inbox: the hub sends s1 no other replies).
	own, err := nats.Connect(sites["s1"].Broker().ClientURL(), nats.CustomInboxPrefix("_INBOX_fleet_node.s1"))
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if _, err := own.Request("esjet-edge.fleet.hub.API.CONSUMER.INFO."+names.Outcomes()+".esjet_site_s1", nil, 5*time.Second); err != nil {
		t.Errorf("s1's own outcome consumer is not reachable from s1: %v", err)
	}

	// The effect: the hub's log and s2's are whole.
	if got := streamMsgs(t, hub.JetStream(), names.Events); got != 6 {
		t.Errorf("the hub's EVENTS holds %d messages after the attack, want 6", got)
	}
	if got := streamMsgs(t, sites["s2"].JetStream(), names.Events); got != 3 {
		t.Errorf("s2's EVENTS holds %d messages after the attack, want 3", got)
	}
	// And the fleet still works: a new decision at s2 reaches the hub and
	// its hub kind's outcome comes back.
	if _, err := sites["s2"].API().Send(t.Context(), "order", "s2-o2", "place", []byte(`{}`), api.Meta{}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 60*time.Second, func() bool { return streamMsgs(t, hub.JetStream(), names.Events) == 9 })
}

// TestEdgeFleetWithUsersEverywhereRunsWithPerSiteLeafUsers pins the
// production shape: the hub and the sites run with nats.embedded.users
// (the node connects as role node), and each site authenticates on the
// leaf link as its own leaf user; decisions still reach the hub and a hub
// kind's outcome still comes back to its site.
func TestEdgeFleetWithUsersEverywhereRunsWithPerSiteLeafUsers(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	hub, sites := startFleet(t, func(role string, cfg *config.Config) {
		cfg.NATS.Embedded.Users = []config.User{{Name: "app", Password: string(hash), Role: config.RoleClient}}
		if role == config.EdgeHub {
			cfg.Edge.LeafUsers = []config.LeafUser{{Site: "s1", Password: string(hash)}, {Site: "s2", User: "shop-two", Password: string(hash)}}
			return
		}
		cfg.Edge.Auth = config.Auth{User: map[string]string{"s1": "s1", "s2": "shop-two"}[role], Password: "pw"}
	})
	names := streams.NamesFor("fleet")
	for id, s := range sites {
		if _, err := s.API().Send(t.Context(), "order", id+"-o1", "place", []byte(`{}`), api.Meta{}); err != nil {
			t.Fatalf("place %s-o1: %v", id, err)
		}
	}
	for _, s := range sites {
		natstest.Eventually(t, 60*time.Second, func() bool { return streamMsgs(t, s.JetStream(), names.Events) == 3 })
	}
	natstest.Eventually(t, 60*time.Second, func() bool { return streamMsgs(t, hub.JetStream(), names.Events) == 6 })
}

// TestEdgeHubLocalClientCannotDeleteASitesLog pins what the hub may do to
// a site: its sourcing and stream info, not a site's stream deletion,
// purge, update or direct reads. (The hub stays trusted with the site:
// creating a source consumer is a consumer create, which can name any
// delivery subject at the site; docs/edge.md.)
func TestEdgeHubLocalClientCannotDeleteASitesLog(t *testing.T) {
	hub, sites := startFleet(t, nil)
	names := streams.NamesFor("fleet")
	if _, err := sites["s1"].API().Send(t.Context(), "order", "s1-o1", "place", []byte(`{}`), api.Meta{}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 60*time.Second, func() bool { return streamMsgs(t, hub.JetStream(), names.Events) == 3 })
	// The hub node's inbox: the site's replies reach it, so a refusal is
	// the permission's, not a lost reply.
	local, err := nats.Connect(hub.Broker().ClientURL(), nats.CustomInboxPrefix("_INBOX_fleet_node.hub"))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	if _, err := local.Request("$JS.s1.API.STREAM.INFO."+names.Events, nil, 5*time.Second); err != nil {
		t.Fatalf("the hub cannot read s1's stream info: %v", err)
	}
	for _, subj := range []string{
		"$JS.s1.API.STREAM.DELETE." + names.Events,
		"$JS.s1.API.STREAM.PURGE." + names.Outbox,
		"$JS.s1.API.STREAM.UPDATE." + names.Events,
		"$JS.s1.API.DIRECT.GET." + names.Events,
		"$JS.s1.API.STREAM.INFO.KV_fleet_receipts",
		"$JS.s1.API.INFO",
	} {
		var body []byte
		if strings.Contains(subj, "DIRECT.GET") {
			body = []byte(`{"seq":1}`)
		}
		if m, err := local.Request(subj, body, time.Second); err == nil {
			t.Errorf("a client at the hub asked %s across the link and got an answer: %.200s", subj, m.Data)
		}
	}
	if got := streamMsgs(t, sites["s1"].JetStream(), names.Events); got != 3 {
		t.Errorf("s1's EVENTS holds %d messages after the hub's requests, want 3", got)
	}
	if got := streamMsgs(t, sites["s1"].JetStream(), names.Outbox); got == 0 {
		t.Errorf("s1's OUTBOX is empty after the hub's requests")
	}
}

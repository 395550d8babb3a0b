package node

import (
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/broker"
	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// subjectMsgs counts stream's messages on subject.
func subjectMsgs(t *testing.T, js jetstream.JetStream, stream, subject string) uint64 {
	t.Helper()
	st, err := js.Stream(t.Context(), stream)
	if err != nil {
		return 0
	}
	info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

// settledFleet starts the fleet and has each site place <site>-o1, waiting
// for its three decisions at the site and all six at the hub.
func settledFleet(t *testing.T) (hub *Node, sites map[string]*Node) {
	t.Helper()
	hub, sites = startFleet(t, nil)
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
	return hub, sites
}

// copyMsg is m with headers cloned.
func copyMsg(m *jetstream.RawStreamMsg, subject string) *nats.Msg {
	h := nats.Header{}
	for k, v := range m.Header {
		if strings.HasPrefix(k, "Nats-Expected-") {
			continue
		}
		h[k] = append([]string(nil), v...)
	}
	return &nats.Msg{Subject: subject, Header: h, Data: append([]byte(nil), m.Data...)}
}

// sourceDeliveries are the delivery subjects of the hub's source consumers
// at site, as a process on the site's NATS learns them from their
// heartbeats.
func sourceDeliveries(t *testing.T, site *Node, id string) []string {
	t.Helper()
	heard := subscribe(t, connectLocal(t, site), "esjet-edge.fleet.src."+id+".>")
	var deliver []string
	natstest.Eventually(t, 15*time.Second, func() bool {
		seen := map[string]bool{}
		for _, m := range heard.all() {
			seen[m.Subject] = true
		}
		deliver = deliver[:0]
		for d := range seen {
			deliver = append(deliver, d)
		}
		return len(deliver) >= 2
	})
	return deliver
}

// forgeFlowControl sends, on every source delivery subject at site, a flow
// control request and a stalled heartbeat naming each of replies: the
// staging account's sourcing publishes an empty message on each.
func forgeFlowControl(t *testing.T, site *Node, deliver, replies []string) {
	t.Helper()
	for _, d := range deliver {
		for _, r := range replies {
			hpub(t, site.Broker().ClientURL(), d, r, "NATS/1.0 100 FlowControl Request")
			hpub(t, site.Broker().ClientURL(), d, "", "NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 0\r\nNats-Last-Stream: 0\r\nNats-Consumer-Stalled: "+r)
		}
	}
}

// TestEdgeSiteForgedFlowControlStaysInItsStagingAccount: s1's forged flow
// control answers land in s1's staging account. From there they must not
// reach s2's staging streams (by name, or on the prefix the hub's streams
// account reaches them on), the hub's streams, or purge s1's own staging
// streams (deny purge); s2 goes on syncing.
func TestEdgeSiteForgedFlowControlStaysInItsStagingAccount(t *testing.T) {
	hub, sites := settledFleet(t)
	names := streams.NamesFor("fleet")
	cfg := edgeConfig(t, "hub")
	s1Ev, s1Ob := "FLEET_SITE_S1_EVENTS", "FLEET_SITE_S1_OUTBOX"
	s2Ev, s2Ob := "FLEET_SITE_S2_EVENTS", "FLEET_SITE_S2_OUTBOX"
	stage := func(site string) jetstream.JetStream {
		js, err := stagingJetStream(hub.JetStream(), cfg, site)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	s1Before := streamMsgs(t, stage("s1"), s1Ev)
	s2Before, s2ObBefore := streamMsgs(t, stage("s2"), s2Ev), streamMsgs(t, stage("s2"), s2Ob)
	if s1Before == 0 || s2Before == 0 {
		t.Fatalf("staging streams before the attack: s1 %d, s2 %d messages", s1Before, s2Before)
	}
	var replies []string
	for _, verb := range []string{"STREAM.DELETE.", "STREAM.PURGE."} {
		for _, st := range []string{s2Ev, s2Ob, names.Events, names.Outbox, names.Outcomes(), names.DLQ} {
			replies = append(replies, "$JS.API."+verb+st, "esjet-edge.fleet.stage.s2.API."+verb+st, "$JS.hub.API."+verb+st)
		}
		replies = append(replies, "$JS.API."+verb+s1Ev, "$JS.API."+verb+s1Ob)
	}
	replies = append(replies,
		"$JS.s2.API.STREAM.DELETE."+names.Events,
		"$JS.s2.API.CONSUMER.DELETE."+names.Events+".x",
		"$JS.API.CONSUMER.DELETE."+names.Outcomes()+".esjet_site_s2",
		"$JS.API.CONSUMER.DELETE."+names.Outbox+"."+wire.WorkerConsumerName("charge"),
		names.OutcomeSubject("s2"), "$KV."+names.Receipts+".forged", "fleet.dlq.charge.forged",
	)
	forgeFlowControl(t, sites["s1"], sourceDeliveries(t, sites["s1"], "s1"), replies)
	time.Sleep(2 * time.Second)

	// s1's own staging streams: purge denied (a delete, also named, is the
	// worst it can do to itself: docs/edge.md).
	// s2 still syncs, through its staging streams.
	if _, err := sites["s2"].API().Send(t.Context(), "order", "s2-o2", "place", []byte(`{}`), api.Meta{}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 60*time.Second, func() bool {
		return subjectMsgs(t, hub.JetStream(), names.Events, names.Namespace+".evt.order.s2-o2") == 3
	})
	if got := streamMsgs(t, stage("s2"), s2Ev); got != s2Before+3 {
		t.Errorf("s2's staging EVENTS holds %d messages after s1's attack and s2-o2, want %d", got, s2Before+3)
	}
	if got := streamMsgs(t, stage("s2"), s2Ob); got <= s2ObBefore {
		t.Errorf("s2's staging OUTBOX holds %d messages after s2-o2, had %d", got, s2ObBefore)
	}
	for _, st := range []string{names.Events, names.Outbox, names.Outcomes(), names.DLQ} {
		if _, err := hub.JetStream().Stream(t.Context(), st); err != nil {
			t.Errorf("the hub's %s after s1's attack: %v", st, err)
		}
	}
	if got := subjectMsgs(t, hub.JetStream(), names.Outcomes(), names.OutcomeSubject("s2")); got != 2 {
		t.Errorf("the hub's OUTCOMES holds %d outcomes for s2, want its 2 charges", got)
	}
	if _, err := hub.JetStream().Consumer(t.Context(), names.Outcomes(), "esjet_site_s2"); err != nil {
		t.Errorf("s2's outcome consumer after s1's attack: %v", err)
	}
	if got := streamMsgs(t, hub.JetStream(), names.DLQ); got != 0 {
		t.Errorf("the hub's DLQ holds %d messages after s1's attack", got)
	}
	if st, err := stage("s1").Stream(t.Context(), s1Ev); err == nil {
		if got := st.CachedInfo().State.Msgs; got < s1Before {
			t.Errorf("s1's staging EVENTS holds %d messages after the forged purge, had %d", got, s1Before)
		}
	}
}

// TestEdgeHubRecoversASiteWhoseStagingStreamsItDeleted pins the README's
// remedy for the worst s1's forged flow control can do: have its own
// staging streams deleted (reply $JS.API.STREAM.DELETE.<staging>), which
// stops its sync. s1 records on meanwhile; restarting the hub node makes
// the staging streams again and the hub holds every s1 decision once, runs
// s1-o2's charge once, and s2 is untouched throughout.
func TestEdgeHubRecoversASiteWhoseStagingStreamsItDeleted(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	leafAddr := l.Addr().String()
	_ = l.Close()
	var hubCfg config.Config
	hub, sites := startFleet(t, func(role string, cfg *config.Config) {
		if role == config.EdgeHub {
			cfg.Edge.LeafListen = leafAddr
			hubCfg = *cfg
		}
	})
	names := streams.NamesFor("fleet")
	for id, s := range sites {
		if _, err := s.API().Send(t.Context(), "order", id+"-o1", "place", []byte(`{}`), api.Meta{}); err != nil {
			t.Fatal(err)
		}
	}
	natstest.Eventually(t, 60*time.Second, func() bool { return streamMsgs(t, hub.JetStream(), names.Events) == 6 })
	natstest.Eventually(t, 60*time.Second, func() bool { return streamMsgs(t, sites["s1"].JetStream(), names.Events) == 3 })
	sEv, sOb := broker.StagingStreams("fleet", "s1")
	forgeFlowControl(t, sites["s1"], sourceDeliveries(t, sites["s1"], "s1"), []string{"$JS.API.STREAM.DELETE." + sEv, "$JS.API.STREAM.DELETE." + sOb})
	stage, err := stagingJetStream(hub.JetStream(), hubCfg, "s1")
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		_, err := stage.Stream(t.Context(), sEv)
		return errors.Is(err, jetstream.ErrStreamNotFound)
	})
	for _, id := range []string{"s1-o2", "s1-o3"} {
		if _, err := sites["s1"].API().Send(t.Context(), "order", id, "place", []byte(`{}`), api.Meta{}); err != nil {
			t.Fatal(err)
		}
	}
	// s2 is not affected while s1's sync is stopped.
	if _, err := sites["s2"].API().Send(t.Context(), "order", "s2-o2", "place", []byte(`{}`), api.Meta{}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 60*time.Second, func() bool {
		return subjectMsgs(t, sites["s2"].JetStream(), names.Events, names.Namespace+".evt.order.s2-o2") == 3
	})
	// The remedy: restart the hub node.
	if err := hub.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	var charged atomic.Int64
	hub = startTestNode(t, hubCfg, Options{Aggregates: []*aggregate.Definition{orderDefinition()},
		Handlers: map[string]consumer.Handler{"charge": countingHandler(&charged)}})
	for _, id := range []string{"s1-o2", "s1-o3"} {
		natstest.Eventually(t, 90*time.Second, func() bool {
			return subjectMsgs(t, sites["s1"].JetStream(), names.Events, names.Namespace+".evt.order."+id) == 3
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for streamMsgs(t, hub.JetStream(), names.Events) < 15 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	if t.Failed() || streamMsgs(t, hub.JetStream(), names.Events) != 15 {
		for _, s := range hub.sites.Sites() {
			t.Logf("site %+v", s)
		}
	}
	for _, id := range []string{"s1-o1", "s1-o2", "s1-o3", "s2-o1", "s2-o2"} {
		if got := subjectMsgs(t, hub.JetStream(), names.Events, names.Namespace+".evt.order."+id); got != 3 {
			t.Errorf("the hub holds %d decisions of %s after the recovery, want 3 (each once)", got, id)
		}
	}
	if got := streamMsgs(t, hub.JetStream(), names.Events); got != 15 {
		t.Errorf("the hub's EVENTS holds %d messages after the recovery, want 15", got)
	}
	if got := subjectMsgs(t, hub.JetStream(), names.Outcomes(), names.OutcomeSubject("s1")); got != 3 {
		t.Errorf("the hub's OUTCOMES holds %d outcomes for s1, want 3 (each charge once)", got)
	}
	if got := charged.Load(); got != 2 {
		t.Errorf("the restarted hub charged %d times, want 2 (s1-o2 and s1-o3, once each)", got)
	}
}

// TestEdgeSiteCannotPullAnotherSitesOutcomesByAck: $JS.ACK.… from a leaf is
// not checked against the leaf user's permissions, and the leaf account
// imports every site's outcome consumer's acks. s1 acks with +NXT on s2's
// outcome consumer, with a reply on s1's node inbox (which the hub sends
// s1): it must receive none of s2's outcomes, and s2 must get its own.
func TestEdgeSiteCannotPullAnotherSitesOutcomesByAck(t *testing.T) {
	hub, sites := settledFleet(t)
	names := streams.NamesFor("fleet")
	attacker := connectLocal(t, sites["s1"])
	inbox := "_INBOX_fleet_node.s1.steal"
	heard := subscribe(t, attacker, inbox+".>")
	c := names.Outcomes() + ".esjet_site_s2"
	for i := 0; i < 20; i++ {
		for _, ack := range []string{"$JS.ACK." + c + ".1.1.1.0.0", "$JS.ACK.hub.ACC." + c + ".1.1.1.0.0.0.x"} {
			m := &nats.Msg{Subject: ack, Reply: inbox + ".x", Data: []byte(`+NXT {"batch":10,"expires":20000000000}`)}
			if err := attacker.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := attacker.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if _, err := sites["s2"].API().Send(t.Context(), "order", "s2-o2", "place", []byte(`{}`), api.Meta{}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 60*time.Second, func() bool {
		return subjectMsgs(t, hub.JetStream(), names.Outcomes(), names.OutcomeSubject("s2")) == 2
	})
	time.Sleep(3 * time.Second)
	for _, m := range heard.all() {
		if m.Header.Get("Status") != "" {
			continue
		}
		t.Errorf("s1 received from s2's outcome consumer on %s: %.200s", m.Subject, m.Data)
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		return subjectMsgs(t, sites["s2"].JetStream(), names.Events, names.Namespace+".evt.order.s2-o2") == 3
	})
}

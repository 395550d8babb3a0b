package node

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/bcrypt"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// hubState is what a site must not be able to change at the hub through
// its leaf link: the counts of OUTCOMES, the receipts bucket and the DLQ,
// and the hub worker consumer's delivery and ack state.
type hubState struct {
	outcomes, receipts, dlq uint64
	delivered, ackFloor     uint64
	ackPending              int
}

func readHubState(t *testing.T, js jetstream.JetStream) hubState {
	t.Helper()
	names := streams.NamesFor("fleet")
	s := hubState{
		outcomes: streamMsgs(t, js, names.Outcomes()),
		receipts: streamMsgs(t, js, "KV_"+names.Receipts),
		dlq:      streamMsgs(t, js, names.DLQ),
	}
	c, err := js.Consumer(t.Context(), names.Outbox, wire.WorkerConsumerName("charge"))
	if err != nil {
		t.Fatalf("the hub's charge worker consumer: %v", err)
	}
	ci, err := c.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s.delivered, s.ackFloor, s.ackPending = ci.Delivered.Stream, ci.AckFloor.Stream, ci.NumAckPending
	return s
}

// leafReplyAttack runs issue 26's leaf reply attacks from a client without
// credentials on site s1's local NATS, once the fleet settled:
//
//   - (a) a request the site may make at the hub (its own outcome
//     consumer's INFO and MSG.NEXT, on either prefix) with a reply subject that the hub's
//     streams capture (another site's outcomes, a receipt, a dead letter):
//     the hub's JetStream would answer into its own streams;
//   - (b) an ack with +NXT on the hub workers' consumer of OUTBOX
//     ($JS.ACK.… is not checked against the leaf user's permissions) with a
//     reply the attacker receives: it would pull every site's commands.
//
// Afterwards the hub's OUTCOMES, receipts and DLQ hold what they held, the
// worker consumer's state is unchanged, and the attacker received nothing.
func leafReplyAttack(t *testing.T, hub *Node, sites map[string]*Node) {
	t.Helper()
	names := streams.NamesFor("fleet")
	for id, s := range sites {
		if _, err := s.API().Send(t.Context(), "order", id+"-o1", "place", []byte(`{}`), api.Meta{}); err != nil {
			t.Fatalf("place %s-o1: %v", id, err)
		}
	}
	// place, ship_done, charge_done at each site: the outcome came back.
	for _, s := range sites {
		natstest.Eventually(t, 60*time.Second, func() bool { return streamMsgs(t, s.JetStream(), names.Events) == 3 })
	}
	before := readHubState(t, hub.JetStream())
	// settled: the hub's worker acked both commands.
	natstest.Eventually(t, 10*time.Second, func() bool {
		before = readHubState(t, hub.JetStream())
		return before.ackPending == 0 && before.ackFloor == before.delivered
	})

	attacker := connectLocal(t, sites["s1"])
	// A reply the hub sends to s1 (the s1 node's inbox): where the attacker
	// would read what it pulled.
	inbox := "_INBOX_fleet_node.s1.attacker"
	heard := subscribe(t, attacker, inbox+".>")
	own := names.Outcomes() + ".esjet_site_s1"
	for _, reply := range []string{
		names.OutcomeSubject("s2") + ".forged",
		"$KV." + names.Receipts + ".forged",
		"fleet.dlq.charge.forged",
	} {
		// in the hub's domain (how a site pulled before the leaf account),
		// and on the prefix a site pulls on now, which the hub serves
		for _, api := range []string{"$JS.hub.API", "esjet-edge.fleet.hub.API"} {
			if err := attacker.PublishRequest(api+".CONSUMER.INFO."+own, reply, nil); err != nil {
				t.Fatal(err)
			}
			if err := attacker.PublishRequest(api+".CONSUMER.MSG.NEXT."+own, reply, []byte(`{"batch":1,"no_wait":true}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	worker := wire.WorkerConsumerName("charge")
	for _, ack := range []string{
		"$JS.ACK." + names.Outbox + "." + worker + ".1.1.1.0.0",
		"$JS.ACK.hub.ACC." + names.Outbox + "." + worker + ".1.1.1.0.0.0.x",
	} {
		msg := &nats.Msg{Subject: ack, Reply: inbox + ".pull", Data: []byte(`+NXT {"batch":100,"no_wait":true}`)}
		if err := attacker.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
		msg = &nats.Msg{Subject: ack, Reply: inbox + ".wait", Data: []byte(`+NXT {"batch":100,"expires":3000000000}`)}
		if err := attacker.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
	}
	if err := attacker.Flush(); err != nil {
		t.Fatal(err)
	}
	// A new command for the hub while the attacker's pull would wait: it
	// must reach the hub's worker, not the attacker.
	if _, err := sites["s1"].API().Send(t.Context(), "order", "s1-o2", "place", []byte(`{}`), api.Meta{}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 60*time.Second, func() bool { return streamMsgs(t, sites["s1"].JetStream(), names.Events) == 6 })
	time.Sleep(2 * time.Second)

	after := readHubState(t, hub.JetStream())
	if after.receipts != before.receipts+1 { // the new charge's own receipt
		t.Errorf("the hub's receipts hold %d entries after the attack, want %d (+1 for s1-o2's charge): a site wrote a receipt at the hub", after.receipts, before.receipts+1)
	}
	if after.outcomes != before.outcomes+1 { // s1-o2's charge_done
		t.Errorf("the hub's OUTCOMES holds %d messages after the attack, want %d (+1 for s1-o2's charge): a site forged an outcome", after.outcomes, before.outcomes+1)
	}
	if after.dlq != before.dlq {
		t.Errorf("the hub's DLQ holds %d messages after the attack, want %d: a site forged a dead letter", after.dlq, before.dlq)
	}
	if after.delivered != before.delivered+1 || after.ackFloor != after.delivered {
		t.Errorf("the hub's charge worker consumer: delivered %d, ack floor %d after the attack; want %d and all acked by the worker", after.delivered, after.ackFloor, before.delivered+1)
	}
	for _, m := range heard.all() {
		if m.Header.Get("Status") == "503" {
			continue // no responders: s1's own server says nothing at the hub listens
		}
		t.Errorf("a client at s1 received from the hub on %s: %v %.200s", m.Subject, m.Header, m.Data)
	}
	// The link still works for s1 itself: both outcomes came back.
	if got := streamMsgs(t, sites["s1"].JetStream(), names.Events); got != 6 {
		t.Errorf("s1's EVENTS holds %d messages, want 6", got)
	}
}

// TestEdgeSiteCannotAnswerIntoTheHubOrPullItsWork runs the leaf reply
// attacks against a loopback fleet without users.
func TestEdgeSiteCannotAnswerIntoTheHubOrPullItsWork(t *testing.T) {
	hub, sites := startFleet(t, nil)
	leafReplyAttack(t, hub, sites)
}

// TestEdgeSiteWithUsersCannotAnswerIntoTheHubOrPullItsWork runs them
// against a hub with users (its streams in ESJET_FLEET) and a leaf user
// per site; the sites keep their default, no users.
func TestEdgeSiteWithUsersCannotAnswerIntoTheHubOrPullItsWork(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	hub, sites := startFleet(t, func(role string, cfg *config.Config) {
		if role == config.EdgeHub {
			cfg.NATS.Embedded.Users = []config.User{{Name: "app", Password: string(hash), Role: config.RoleClient}}
			cfg.Edge.LeafUsers = []config.LeafUser{{Site: "s1", Password: string(hash)}, {Site: "s2", Password: string(hash)}}
			return
		}
		cfg.Edge.Auth = config.Auth{User: role, Password: "pw"}
	})
	leafReplyAttack(t, hub, sites)
}

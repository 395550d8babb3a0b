package node

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// hpub publishes one message with a raw header block (a status line, which
// nats.go does not write) on a plain client connection to url.
func hpub(t *testing.T, rawURL, subject, reply, hdr string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	if _, err := r.ReadString('\n'); err != nil { // INFO
		t.Fatal(err)
	}
	h := hdr + "\r\n\r\n"
	fmt.Fprintf(c, "CONNECT {\"verbose\":false,\"headers\":true,\"protocol\":1}\r\nHPUB %s %s %d %d\r\n%s\r\nPING\r\n", subject, reply, len(h), len(h), h)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("hpub %s: %v", subject, err)
		}
		if strings.HasPrefix(line, "PONG") {
			return
		}
		if strings.HasPrefix(line, "-ERR") {
			t.Fatalf("hpub %s: %s", subject, line)
		}
	}
}

// TestEdgeSiteCannotHaveTheHubsSourcingAnswerIntoItsStreams pins the
// sourcing side of the leaf reply attack: a process at site s1 learns the
// delivery subject of the hub's source consumer at s1 (its own NATS has
// no users) and sends on it a flow control request, and an idle heartbeat
// saying the consumer is stalled, whose reply subjects are the hub's
// OUTCOMES and DLQ subjects. The hub's sourcing answers flow control
// where the request says; it must not land in the hub's streams.
//
// KNOWN OPEN, skipped so that the suite stays green: the leaf account does
// not close this one. The deliveries cross into the streams' account by a
// stream import, which keeps the reply subject the site chose (only a
// service import gives it a _R_ reply, and sourcing needs the deliveries'
// own $JS.ACK.… replies to read their sequences), and nats-server's
// sourcing answers a flow control request, and a heartbeat's
// Nats-Consumer-Stalled, on that subject in the streams' account
// (stream.go processInboundSourceMsg, handleFlowControl,
// processStalledFlowControl, v2.15.2): an empty message lands in OUTCOMES,
// the DLQ, OUTBOX or a bucket. Run with ESJET_KNOWN_OPEN=1 to see it fail.
func TestEdgeSiteCannotHaveTheHubsSourcingAnswerIntoItsStreams(t *testing.T) {
	if os.Getenv("ESJET_KNOWN_OPEN") == "" {
		t.Skip("known open: a site's forged flow control request has the hub's sourcing answer into the hub's streams (see the comment)")
	}
	hub, sites := startFleet(t, nil)
	names := streams.NamesFor("fleet")
	if _, err := sites["s1"].API().Send(t.Context(), "order", "s1-o1", "place", []byte(`{}`), api.Meta{}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 60*time.Second, func() bool { return streamMsgs(t, sites["s1"].JetStream(), names.Events) == 3 })
	natstest.Eventually(t, 60*time.Second, func() bool { return streamMsgs(t, hub.JetStream(), names.Events) == 3 })
	outcomes, dlq := streamMsgs(t, hub.JetStream(), names.Outcomes()), streamMsgs(t, hub.JetStream(), names.DLQ)

	// The source consumers' heartbeats name their delivery subjects.
	heard := subscribe(t, connectLocal(t, sites["s1"]), "esjet-edge.fleet.src.s1.>")
	var deliver []string
	natstest.Eventually(t, 10*time.Second, func() bool {
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
	if len(deliver) == 0 {
		t.Fatal("no source consumer of the hub's at s1")
	}
	for _, d := range deliver {
		hpub(t, sites["s1"].Broker().ClientURL(), d, names.OutcomeSubject("s2")+".fc", "NATS/1.0 100 FlowControl Request")
		hpub(t, sites["s1"].Broker().ClientURL(), d, "", "NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 0\r\nNats-Last-Stream: 0\r\nNats-Consumer-Stalled: fleet.dlq.charge.stalled")
	}
	time.Sleep(2 * time.Second)
	if got := streamMsgs(t, hub.JetStream(), names.Outcomes()); got != outcomes {
		t.Errorf("the hub's OUTCOMES holds %d messages after the attack, want %d: the hub's sourcing answered into it", got, outcomes)
	}
	if got := streamMsgs(t, hub.JetStream(), names.DLQ); got != dlq {
		t.Errorf("the hub's DLQ holds %d messages after the attack, want %d: the hub's sourcing answered into it", got, dlq)
	}
}

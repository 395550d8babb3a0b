package node

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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
// nats-server's sourcing answers a flow control request, and a heartbeat's
// Nats-Consumer-Stalled, on the subject the delivery names, in the account
// of the stream that sources (stream.go processInboundSourceMsg,
// handleFlowControl, processStalledFlowControl, v2.15.2), and the
// deliveries cross by a stream import, which keeps that subject. Before the
// staging accounts the hub's streams sourced the sites themselves: the
// answers landed in OUTCOMES and the DLQ, and one on
// $JS.API.STREAM.DELETE.<NS>_OUTCOMES deleted the stream. Now the site's
// staging account sources it, and what it answers reaches nothing but
// that account.
func TestEdgeSiteCannotHaveTheHubsSourcingAnswerIntoItsStreams(t *testing.T) {
	hub, sites := startFleet(t, nil)
	names := streams.NamesFor("fleet")
	if _, err := sites["s1"].API().Send(t.Context(), "order", "s1-o1", "place", []byte(`{}`), api.Meta{}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 60*time.Second, func() bool { return streamMsgs(t, sites["s1"].JetStream(), names.Events) == 3 })
	natstest.Eventually(t, 60*time.Second, func() bool { return streamMsgs(t, hub.JetStream(), names.Events) == 3 })
	outcomes, dlq := streamMsgs(t, hub.JetStream(), names.Outcomes()), streamMsgs(t, hub.JetStream(), names.DLQ)

	// The source consumers' heartbeats name their delivery subjects.
	deliver := sourceDeliveries(t, sites["s1"], "s1")
	if len(deliver) == 0 {
		t.Fatal("no source consumer of the hub's at s1")
	}
	for _, d := range deliver {
		hpub(t, sites["s1"].Broker().ClientURL(), d, names.OutcomeSubject("s2")+".fc", "NATS/1.0 100 FlowControl Request")
		hpub(t, sites["s1"].Broker().ClientURL(), d, "", "NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 0\r\nNats-Last-Stream: 0\r\nNats-Consumer-Stalled: fleet.dlq.charge.stalled")
		hpub(t, sites["s1"].Broker().ClientURL(), d, "$JS.API.STREAM.DELETE."+names.Outcomes(), "NATS/1.0 100 FlowControl Request")
		hpub(t, sites["s1"].Broker().ClientURL(), d, "$JS.API.STREAM.DELETE."+names.Events, "NATS/1.0 100 FlowControl Request")
	}
	// A decision made after the attack reaching the hub is the barrier:
	// sourcing took the forged messages before it, on the same subjects.
	if _, err := sites["s1"].API().Send(t.Context(), "order", "s1-o2", "place", []byte(`{}`), api.Meta{}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 60*time.Second, func() bool {
		st, err := hub.JetStream().Stream(t.Context(), names.Events)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Fatalf("the hub's EVENTS was deleted by the attack")
		}
		return err == nil && st.CachedInfo().State.Msgs >= 6
	})
	for stream, subj := range map[string]string{names.Outcomes(): names.OutcomeSubject("s2") + ".fc", names.DLQ: "fleet.dlq.charge.stalled"} {
		st, err := hub.JetStream().Stream(t.Context(), stream)
		if err != nil {
			t.Errorf("the hub's %s after the attack: %v", stream, err)
			continue
		}
		info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(subj))
		if err != nil {
			t.Fatal(err)
		}
		if n := info.State.Subjects[subj]; n > 0 {
			t.Errorf("the hub's %s holds %d messages on %s: the hub's sourcing answered into it", stream, n, subj)
		}
	}
	if got := streamMsgs(t, hub.JetStream(), names.DLQ); got != dlq {
		t.Errorf("the hub's DLQ holds %d messages after the attack, want %d", got, dlq)
	}
	if got := streamMsgs(t, hub.JetStream(), names.Outcomes()); got < outcomes {
		t.Errorf("the hub's OUTCOMES holds %d messages after the attack, had %d", got, outcomes)
	}
}

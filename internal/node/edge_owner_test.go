package node

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// hubRefused counts the commands the hub's workers refused to run.
func hubRefused(hub *Node) int64 {
	var n int64
	for _, w := range hub.Workers() {
		n += w.Stats().Refused
	}
	return n
}

// TestEdgeHubRunsOnlyCommandsOfTheSiteThatOwnsTheAggregate: a process on
// s1's local NATS (no users) writes into s1's own OUTBOX a hub kind's
// command (charge) for s2's aggregate s2-o1. The hub sources it from s1's
// staging stream, which the server names on the message; the hub's worker
// refuses it (s2 owns s2-o1), so nothing is charged and no outcome is
// recorded for s2, which s2 would pull and apply.
func TestEdgeHubRunsOnlyCommandsOfTheSiteThatOwnsTheAggregate(t *testing.T) {
	hub, sites := settledFleet(t)
	names := streams.NamesFor("fleet")
	attacker, err := jetstream.New(connectLocal(t, sites["s1"]))
	if err != nil {
		t.Fatal(err)
	}
	hubOut := subjectMsgs(t, hub.JetStream(), names.Outcomes(), names.OutcomeSubject("s2"))
	refused := hubRefused(hub)
	ob, err := sites["s1"].JetStream().Stream(t.Context(), names.Outbox)
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := ob.GetLastMsgForSubject(t.Context(), names.Namespace+".outbox.charge")
	if err != nil {
		t.Fatal(err)
	}
	fc := copyMsg(cmd, cmd.Subject)
	fc.Header.Set(wire.HeaderAggregateID, "s2-o1")
	fc.Header.Set(wire.HeaderCommandID, "order:s2-o1:9:1")
	fc.Header.Set(jetstream.MsgIDHeader, "order:s2-o1:9:1")
	if _, err := attacker.PublishMsg(t.Context(), fc); err != nil {
		t.Fatalf("s1's own OUTBOX refused the forged command: %v", err)
	}
	natstest.Eventually(t, 60*time.Second, func() bool { return hubRefused(hub) > refused })
	if got := subjectMsgs(t, hub.JetStream(), names.Outcomes(), names.OutcomeSubject("s2")); got != hubOut {
		t.Errorf("the hub's OUTCOMES holds %d outcomes for s2 after s1's forged charge, had %d: the hub's worker acted for s2 on s1's word", got, hubOut)
	}
	// s1's own commands still run at the hub.
	if _, err := sites["s1"].API().Send(t.Context(), "order", "s1-o2", "place", []byte(`{}`), api.Meta{}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 60*time.Second, func() bool {
		return subjectMsgs(t, sites["s1"].JetStream(), names.Events, names.Namespace+".evt.order.s1-o2") == 3
	})
}

// TestEdgeSiteCannotPreemptAnotherSitesHubCommand: command ids are
// deterministic (<type>:<id>:<version>:<index>), so s1 can name the charge
// s2 will issue for s2-o2 before s2 issues it. The hub's OUTBOX keeps no
// window of ids (a copy from s1 would stand in for s2's) and its worker
// refuses s1's copy, so s2's own command runs, with s2's payload.
func TestEdgeSiteCannotPreemptAnotherSitesHubCommand(t *testing.T) {
	hub, sites := settledFleet(t)
	names := streams.NamesFor("fleet")
	attacker, err := jetstream.New(connectLocal(t, sites["s1"]))
	if err != nil {
		t.Fatal(err)
	}
	ob, err := sites["s1"].JetStream().Stream(t.Context(), names.Outbox)
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := ob.GetLastMsgForSubject(t.Context(), names.Namespace+".outbox.charge")
	if err != nil {
		t.Fatal(err)
	}
	refused := hubRefused(hub)
	id := "order:s2-o2:1:1" // what s2's place of s2-o2 issues as its charge
	fc := copyMsg(cmd, cmd.Subject)
	fc.Header.Set(wire.HeaderAggregateID, "s2-o2")
	fc.Header.Set(wire.HeaderCommandID, id)
	fc.Header.Set(jetstream.MsgIDHeader, id)
	fc.Data = []byte(`{"amount":"attacker's"}`)
	if _, err := attacker.PublishMsg(t.Context(), fc); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 60*time.Second, func() bool { return hubRefused(hub) > refused })
	if _, err := sites["s2"].API().Send(t.Context(), "order", "s2-o2", "place", []byte(`{}`), api.Meta{}); err != nil {
		t.Fatal(err)
	}
	// s2's own charge runs at the hub and its outcome comes back to s2.
	natstest.Eventually(t, 60*time.Second, func() bool {
		return subjectMsgs(t, sites["s2"].JetStream(), names.Events, names.Namespace+".evt.order.s2-o2") == 3
	})
	hob, err := hub.JetStream().Stream(t.Context(), names.Outbox)
	if err != nil {
		t.Fatal(err)
	}
	var copies []*jetstream.RawStreamMsg
	for seq := hob.CachedInfo().State.FirstSeq; seq <= hob.CachedInfo().State.LastSeq; seq++ {
		m, err := hob.GetMsg(t.Context(), seq)
		if err != nil {
			continue
		}
		if m.Header.Get(wire.HeaderCommandID) == id {
			copies = append(copies, m)
		}
	}
	if len(copies) != 2 {
		t.Errorf("the hub's OUTBOX holds %d copies of %s, want s1's (refused) and s2's", len(copies), id)
	}
}

package api

import "testing"

func TestReplyIntoStoreNamesOnlyTheStoresSubjects(t *testing.T) {
	s := &Service{ns: "ns", storeReplies: storeReplies("ns")}
	replyIntoStore := func(_, r string) bool { return s.guardedReply(r) }
	for _, r := range []string{"ns.outbox.x", "ns.evt.trip.t1", "$KV.b.k", "$O.b.c", "$JS.API.INFO", "$SRV.PING", "esjet.ns.trip.t1.book"} {
		if !replyIntoStore("ns", r) {
			t.Errorf("reply %s not counted as the store's", r)
		}
	}
	for _, r := range []string{"", "a.ns.outbox.x", "_INBOX.abc", "_INBOX_app.x", "_R_.x.y", "ns_outbox.x", "other.outbox.x", "esjet.other.x"} {
		if replyIntoStore("ns", r) {
			t.Errorf("reply %s counted as the store's", r)
		}
	}
}

// The node also never answers on what its workers request (a target's
// subject, wildcards included).
func TestGuardedReplyCoversTheWorkersTargets(t *testing.T) {
	s := &Service{ns: "ns", guarded: []string{"demo.svc.>", "billing.charge"}, storeReplies: storeReplies("ns")}
	for _, r := range []string{"demo.svc.budget.release", "billing.charge", "ns.outbox.x"} {
		if !s.guardedReply(r) {
			t.Errorf("reply %s answered", r)
		}
	}
	for _, r := range []string{"billing.charge.x", "demo.svc", "_INBOX_app.x", "_R_.a.b", "_INBOX_ns_node.a.b"} {
		if s.guardedReply(r) {
			t.Errorf("reply %s guarded", r)
		}
	}
}

// The guard runs on every request: it allocates nothing.
func TestGuardedReplyAllocatesNothing(t *testing.T) {
	s := &Service{ns: "ns", guarded: []string{"demo.svc.>", "billing.charge"}, storeReplies: storeReplies("ns")}
	if n := testing.AllocsPerRun(100, func() { _ = s.guardedReply("_INBOX_app.abcdef.ghijk") }); n != 0 {
		t.Errorf("guardedReply allocates %v times a call", n)
	}
}

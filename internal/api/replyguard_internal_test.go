package api

import "testing"

func TestReplyIntoStoreNamesOnlyTheStoresSubjects(t *testing.T) {
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

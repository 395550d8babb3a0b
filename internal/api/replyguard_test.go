package api_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// In one shared account (no users, or permissions written by hand), a
// request whose reply subject is the log, OUTBOX or the API itself is
// dropped: the node never publishes its answer there, so neither stream
// grows, while the same request with an inbox is answered.
func TestNATS_ReplyIntoTheStoreIsNotAnswered(t *testing.T) {
	t.Parallel()
	e := start(t)
	outbox := func() uint64 {
		st, err := e.js.Stream(t.Context(), "TEST_OUTBOX")
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	events, out := e.eventsCount(t), outbox()
	for _, reply := range []string{ns + ".outbox.release_budget", ns + ".evt.trip.t1", "$KV.test_receipts.x", "$JS.API.STREAM.DELETE.TEST_EVENTS", "esjet." + ns + ".trip.t1.cancel"} {
		for _, subject := range []string{"esjet." + ns + ".types", "esjet." + ns + ".trip.t1.state", "$SRV.PING", "$SRV.INFO.esjet"} {
			if err := e.nc.PublishMsg(&nats.Msg{Subject: subject, Reply: reply}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A request with an inbox, sent after them, is answered: the node has
	// seen (and dropped) every forged one by then on this connection's order.
	if _, err := e.nc.Request("esjet."+ns+".types", nil, 5*time.Second); err != nil {
		t.Fatalf("a request with an inbox: %v", err)
	}
	if _, err := e.nc.Request("$SRV.PING", nil, 5*time.Second); err != nil {
		t.Fatalf("a ping with an inbox: %v", err)
	}
	e.wantUnchanged(t, events)
	if got := outbox(); got != out {
		t.Errorf("OUTBOX holds %d messages, want %d: the node answered into it", got, out)
	}
}

package streams

import (
	"errors"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/esjet/esjet/internal/natstest"
)

// A multi-aggregate append stores every decision or none; sent again
// after its reply was lost, it returns the originals and stores nothing.
func TestAppendAll(t *testing.T) {
	t.Parallel()
	h := provisioned([]*server.Server{natstest.RunServer(t)}, 1)(t, Config{})
	a := mustAppend(t, h, decision("acct", "a", "opened"), Position{})
	ds := []Decision{decision("acct", "a", "withdrawn"), decision("acct", "b", "deposited")}
	recs, err := h.log.AppendAll(t.Context(), ds, []Position{a.Position(), {}})
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].Seq != a.Seq+1 || recs[1].Seq != a.Seq+2 || recs[0].FirstVersion() != 2 || recs[1].FirstVersion() != 1 {
		t.Fatalf("records %d v%d, %d v%d", recs[0].Seq, recs[0].FirstVersion(), recs[1].Seq, recs[1].FirstVersion())
	}
	again, err := h.log.AppendAll(t.Context(), ds, []Position{a.Position(), {}})
	if err != nil || again[0].Seq != recs[0].Seq || again[1].Seq != recs[1].Seq {
		t.Fatalf("retry: %v %+v, want the original records", err, again)
	}
	// b is stale now: nothing of the next transfer is stored, and the
	// conflict names b.
	next := []Decision{decision("acct", "a", "withdrawn"), decision("acct", "b", "deposited")}
	_, err = h.log.AppendAll(t.Context(), next, []Position{recs[0].Position(), {}})
	var conflict *ConflictError
	if !errors.As(err, &conflict) || conflict.Subject != h.ns+".evt.acct.b" || conflict.Actual.Seq != recs[1].Seq {
		t.Fatalf("stale b: %v, want a conflict on b at %d", err, recs[1].Seq)
	}
	if n := msgCount(t, h); n != 3 {
		t.Errorf("%d messages, want 3", n)
	}
}

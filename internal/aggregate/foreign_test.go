package aggregate

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/esjet/esjet/internal/natstest"
)

// TestStrayMessageDoesNotBrickTheAggregate: `nats pub <ns>.evt.account.p1
// hello` — a message esjet did not write, which deny-delete keeps for ever,
// last on the aggregate's subject. Commands on p1 must still be decided and
// stored, by a node that had p1 cached and by one loading it cold, and the
// state must be right. Before, every command on p1 failed for good.
func TestStrayMessageDoesNotBrickTheAggregate(t *testing.T) {
	s := natstest.RunServer(t)
	for name, cfg := range map[string]Config{"no snapshots": {SnapshotEvery: -1}, "snapshot every decision": {SnapshotEvery: 1}} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, s)
			warm := f.repo(t, cfg)
			mustSend(t, warm, "p1", "open", `{}`, "")
			mustSend(t, warm, "p1", "deposit", `{"amount":10}`, "")
			ack, err := f.js.Publish(t.Context(), f.ns+".evt.account.p1", []byte("hello"))
			if err != nil {
				t.Fatal(err)
			}

			// A node with p1 cached: its append expects the last decision and conflicts.
			res, err := send(t, warm, "p1", "deposit", `{"amount":5}`, "")
			if err != nil {
				t.Fatalf("deposit on the cached aggregate behind a stray message: %v", err)
			}
			if res.Version != 3 || res.Seq <= ack.Sequence {
				t.Errorf("result = version %d at seq %d, want version 3 after the stray seq %d", res.Version, res.Seq, ack.Sequence)
			}

			// Another stray message, then a node loading p1 cold (snapshot + tail).
			if _, err := f.js.Publish(t.Context(), f.ns+".evt.account.p1", []byte(`{"v":1}`)); err != nil {
				t.Fatal(err)
			}
			cold := f.repo(t, cfg)
			if _, err := send(t, cold, "p1", "withdraw", `{"amount":3}`, "k1"); err != nil {
				t.Fatalf("withdraw on a cold load behind a stray message: %v", err)
			}
			st, err := cold.Get(t.Context(), "account", "p1")
			if err != nil {
				t.Fatal(err)
			}
			var acc account
			b, _ := json.Marshal(st.Value)
			_ = json.Unmarshal(b, &acc)
			if acc.Balance != 12 || acc.Ops != 4 || st.Position.Version != 4 {
				t.Errorf("state = %+v at %+v, want balance 12 after 4 events", acc, st.Position)
			}
			// A retry of the keyed withdraw is still recognised.
			if res, err := send(t, cold, "p1", "withdraw", `{"amount":3}`, "k1"); err != nil || !res.Replayed {
				t.Errorf("retried withdraw: %+v, %v; want the first result replayed", res, err)
			}
			if n := f.log.ForeignSkipped(); n != 2 {
				t.Errorf("ForeignSkipped = %d, want the 2 stray messages", n)
			}
		})
	}
}

// TestStrayMessageAloneIsNotAnAggregate: a subject that holds only a stray
// message has no aggregate (not found), and the first command creates it.
func TestStrayMessageAloneIsNotAnAggregate(t *testing.T) {
	f := newFixture(t, natstest.RunServer(t))
	r := f.repo(t, Config{})
	if _, err := f.js.Publish(t.Context(), f.ns+".evt.account.p2", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(t.Context(), "account", "p2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of a subject with only a stray message: %v, want ErrNotFound", err)
	}
	if res := mustSend(t, r, "p2", "open", `{}`, ""); res.Version != 1 {
		t.Fatalf("open: version %d, want 1", res.Version)
	}
}

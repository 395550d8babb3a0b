package outbox

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/wire"
)

// TestRelayStopsBeforeANewerEnvelope: a decision a newer build wrote
// (envelope version 2) holds commands this build cannot read. The relay
// neither skips it nor acks past it: the decisions before it are relayed,
// the one after waits (counted as TooNew, not as Undecodable).
func TestRelayStopsBeforeANewerEnvelope(t *testing.T) {
	e := newRelayEnv(t, natstest.RunServer(t))
	before := e.appendWithCommands(t, "o1", "ship", 1, time.Time{})
	m := nats.NewMsg(e.ns + ".evt.order.o2")
	m.Header.Set(wire.HeaderEnvelope, "2")
	m.Data = []byte(`{"v":2}`)
	newer, err := e.js.PublishMsg(t.Context(), m)
	if err != nil {
		t.Fatal(err)
	}
	after := e.appendWithCommands(t, "o3", "ship", 1, time.Time{})

	r, _ := runRelay(t, e, RelayConfig{Batch: 10})
	natstest.Eventually(t, 10*time.Second, func() bool { return r.Stats().TooNew >= 2 })
	st := r.Stats()
	got := e.outboxByCommand(t)
	if st.LastSeq != before.Seq || st.Undecodable != 0 || got[before.Commands[0].ID] != 1 || got[after.Commands[0].ID] != 0 {
		t.Fatalf("stats %+v, OUTBOX %v: want the relay acked through seq %d (before the newer envelope at %d), nothing skipped, %s not relayed",
			st, got, before.Seq, newer.Sequence, after.Commands[0].ID)
	}
}

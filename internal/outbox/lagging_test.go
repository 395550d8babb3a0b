package outbox

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// TestRelayLookupOnR3ReadsToTheOutboxLeadersLast is issue 28 item 2 at the
// relay: its "was this decision already relayed?" lookup read OUTBOX with
// direct gets only, which a replica that is behind answers short (a relay
// resumed after the duplicate window onto a freshly restarted replica
// could store a command twice). On a 3-server cluster, a relay resumed
// after the window asks OUTBOX's leader for its last sequence before it
// reads (streams.ScanRange.ToLeaderLast; the streams package proves the
// scan then reads what a lagging replica lacks), and stores no second copy.
func TestRelayLookupOnR3ReadsToTheOutboxLeadersLast(t *testing.T) {
	t.Parallel()
	servers := natstest.RunCluster(t)
	nc, js := natstest.Connect(t, servers[0])
	ns := natstest.Namespace(t)
	if _, err := streams.Provision(t.Context(), js, ns, streams.ProvisionConfig{Replicas: 3, OutboxDuplicateWindow: time.Second}, nil); err != nil {
		t.Fatal(err)
	}
	l, err := streams.Open(t.Context(), js, ns, streams.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &relayEnv{js: js, ns: ns, log: l}
	for i := range 5 {
		e.appendWithCommands(t, fmt.Sprintf("w%d", i), "pay", 1, time.Time{})
	}
	r, stop := runRelay(t, e, RelayConfig{})
	natstest.Eventually(t, 20*time.Second, func() bool { return r.Stats().Decisions == 5 })
	stop()
	time.Sleep(1500 * time.Millisecond) // let the 1s dedup window pass: nothing to poll
	if err := js.DeleteConsumer(t.Context(), streams.NamesFor(ns).Events, ConsumerName); err != nil {
		t.Fatal(err)
	}

	r2, err := NewRelay(t.Context(), js, ns, RelayConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int32 // OUTBOX's leader asked while the relay runs
	if _, err := nc.Subscribe("$JS.API.STREAM.INFO."+streams.NamesFor(ns).Outbox, func(*nats.Msg) { asked.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r2.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay run: %v", err)
		}
	}()
	natstest.Eventually(t, 20*time.Second, func() bool { return r2.Stats().Decisions == 5 })
	if st := r2.Stats(); st.Commands != 0 || st.Duplicates != 5 {
		t.Errorf("resumed relay: %+v; want the 5 commands found in OUTBOX and none published", st)
	}
	if asked.Load() == 0 {
		t.Errorf("the resumed relay's lookup did not ask OUTBOX's leader how far it goes: a lagging replica could answer it short")
	}
	for id, n := range e.outboxByCommand(t) {
		if n != 1 {
			t.Errorf("command %s stored %d times, want once", id, n)
		}
	}
}

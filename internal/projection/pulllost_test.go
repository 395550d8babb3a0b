package projection

import (
	"fmt"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/streams"
)

// A partition whose consumer owes it messages the log holds and delivers
// none starts a new consumer (pullLostAfter) instead of waiting for ever:
// on a cluster an ordered consumer's first pull can be lost, and nats.go
// does not pull again. Here the consumer is paused on the server, which
// looks the same to the partition: pending messages, nothing delivered.
func TestAPartitionWhoseConsumerDeliversNothingStartsANewOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 10 {
		e.append(t, "order", fmt.Sprint("o", i%2), "placed")
	}
	orders := counter("orders")
	orders.AggregateTypes = []string{"order"}
	for _, d := range []Definition{counter("all"), orders} {
		e.run(t, testConfig(), d)
		eventually(t, d.Name+": 5 events of o0 counted", func() bool { return e.count(t, d.Name, "o0") == 5 })
	}
	ctx := t.Context()
	events := streams.NamesFor(e.ns).Events
	st, err := e.js.Stream(ctx, events)
	if err != nil {
		t.Fatal(err)
	}
	paused := 0
	for name := range st.ConsumerNames(ctx).Name() {
		if _, err := e.js.PauseConsumer(ctx, events, name, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		paused++
	}
	if paused < 2 {
		t.Fatalf("%d consumers on %s paused, want the two partitions'", paused, events)
	}
	start := time.Now()
	e.append(t, "order", "o0", "placed")
	for _, view := range []string{"all", "orders"} {
		eventually(t, view+": the event appended while its consumer was paused counted", func() bool { return e.count(t, view, "o0") == 6 })
	}
	if took := time.Since(start); took < pullLostAfter {
		t.Fatalf("counted after %s, before pullLostAfter (%s): was the consumer paused?", took, pullLostAfter)
	}
}

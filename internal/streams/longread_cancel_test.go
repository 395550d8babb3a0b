package streams

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/esjet/esjet/internal/natstest"
)

// A read the caller cancels must say so, as the direct gets do: through the
// consumer, the reader's callback answers ErrStopScan to a cancelled
// context, ReadRange takes that for "stop here, no error", and scan
// returns nil after a partial read.
func TestACancelledLongReadReturnsTheCancellation(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	h := provisioned([]*server.Server{s}, 1)(t, Config{LoadBatch: 3})
	var pos Position
	for i := range 40 {
		pos = mustAppend(t, h, decision("item", "a", fmt.Sprint("e", i)), pos).Position()
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	n := 0
	err := h.log.scan(ctx, h.log.names.EventsFilter(), 1, 0, func(Foreign) {}, func(Record) error {
		if n++; n == 6 { // past the first batch: through the consumer
			time.Sleep(200 * time.Millisecond) // the reader fills the channel and waits on it
			cancel()
		}
		return nil
	})
	if h.log.consumers.reads.Load() == 0 {
		t.Fatal("the read did not go through a consumer")
	}
	if n < 40 && !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled read passed %d of 40 records and returned %v, want context.Canceled", n, err)
	}
}

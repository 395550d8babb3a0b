package ops

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/outbox"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// fillOutbox stores n relay copies in OUTBOX as a relay that lagged behind
// the whole fill would: all after every decision's time, in log order but
// for neighbours swapped (the disorder a relay's unacked window allows),
// every 7th followed by a message that is no relay copy (a foreign one).
// Copy j is of decision 10+4j (its command acct:s<j>:1:0). It returns the
// command ids by j.
func fillOutbox(t *testing.T, e *rcEnv, n int) []string {
	t.Helper()
	ctx := t.Context()
	ids := make([]string, n)
	stored := time.Now().Add(-time.Hour)
	var futs []jetstream.PubAckFuture
	for k := range n {
		if k%1000 == 999 { // stay under the client's limit of outstanding async publishes
			select {
			case <-e.js.PublishAsyncComplete():
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
		j := k ^ 1 // pairs stored swapped
		if j >= n {
			j = k
		}
		rec := streams.Record{Seq: uint64(10 + 4*j), Stored: stored, Decision: streams.Decision{
			ID: fmt.Sprintf("decision-%d", j), AggregateType: "acct", AggregateID: fmt.Sprintf("s%d", j),
			Events: []streams.Event{{Type: "paid", Version: 1}}}}
		ids[j] = wire.CommandID("acct", rec.AggregateID, 1, 0)
		f, err := e.js.PublishMsgAsync(wire.EncodeCommand(e.ns, rec, streams.Command{ID: ids[j], Kind: "charge"}, time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
		if k%7 == 0 {
			f, err := e.js.PublishMsgAsync(&nats.Msg{Subject: wire.CommandSubject(e.ns, "charge"), Data: []byte(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			futs = append(futs, f)
		}
	}
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	return ids
}

// TestCommandLookupReadsTheSameWhateverOutboxHolds: a command's copy is
// found by bisecting OUTBOX on the decision sequence each relay copy
// names, so what a lookup reads does not grow with OUTBOX, nor with how far
// behind the log the relay was when it stored the copy (the search used to
// read OUTBOX from the decision's time: here, from the start).
func TestCommandLookupReadsTheSameWhateverOutboxHolds(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	ctx := t.Context()
	worst := map[int]int64{}
	for _, n := range []int{1000, 8000} {
		e := newRCEnv(t, s, streams.ProvisionConfig{})
		cfg := outbox.RelayConsumerConfig(e.names, outbox.RelayConfig{Batch: 2})
		if _, err := e.js.CreateOrUpdateConsumer(ctx, e.names.Events, cfg); err != nil {
			t.Fatal(err)
		}
		ids := fillOutbox(t, e, n)
		in := Inspect(e.js, e.ns)
		for _, j := range []int{0, 1, n / 3, n/2 + 1, n - 2, n - 1} {
			before := in.outboxRead.Load()
			cause := &Cause{Seq: uint64(10 + 4*j), Time: time.Now().Add(-2 * time.Hour)}
			copies, err := in.outboxCopies(ctx, ids[j], "charge", cause, nil)
			if err != nil {
				t.Fatal(err)
			}
			read := in.outboxRead.Load() - before
			if len(copies) != 1 || copies[0].MsgID != ids[j] {
				t.Fatalf("OUTBOX of %d: copy of %s (decision %d) = %+v", n, ids[j], cause.Seq, copies)
			}
			worst[n] = max(worst[n], read)
		}
		// A decision whose copy never reached OUTBOX: the search ends at
		// the horizon too.
		before := in.outboxRead.Load()
		copies, err := in.outboxCopies(ctx, "acct:nobody:1:0", "charge", &Cause{Seq: uint64(10+4*(n/2)) + 2}, nil)
		if err != nil || len(copies) != 0 {
			t.Fatalf("missing copy: %+v, %v", copies, err)
		}
		worst[n] = max(worst[n], in.outboxRead.Load()-before)
	}
	// log₂(8000) probes more than log₂(1000): three, of a few reads each.
	if worst[8000] > worst[1000]+3*4 || worst[8000] > 150 {
		t.Fatalf("a lookup read at most %d OUTBOX messages of 1,000 and %d of 8,000: it grows with OUTBOX", worst[1000], worst[8000])
	}
	t.Logf("most OUTBOX messages one lookup read: %d of 1,000, %d of 8,000", worst[1000], worst[8000])
}

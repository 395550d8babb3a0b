package streams

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/esjet/esjet/internal/natstest"
)

// TestALongReadThroughAConsumerReadsWhatDirectGetsRead: the rest of a read
// of the whole log that its first batch finds longer than a few batches
// goes through an ordered consumer of the Log's own (longRead); it returns what batched direct gets return — the
// same records in the same order, foreign messages stepped over, limits
// and positions the same — for ReadFrom and ReadAfter.
func TestALongReadThroughAConsumerReadsWhatDirectGetsRead(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	h := provisioned([]*server.Server{s}, 1)(t, Config{LoadBatch: 3}) // long: more than 12
	direct, err := Open(t.Context(), h.js, h.ns, Config{}, nil)       // long: more than 4,000
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	pos := map[int]Position{}
	for i := range 40 {
		d := decision("item", fmt.Sprintf("i%d", i%5), "made", "checked")
		r := mustAppend(t, h, d, pos[i%5])
		pos[i%5] = r.Position()
		if i%9 == 4 { // a stray message on another aggregate's subject
			if _, err := h.js.Publish(ctx, h.ns+".evt.stray.s"+fmt.Sprint(i), []byte("hello")); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct{ from, max int }{{0, 0}, {1, 30}, {7, 0}, {7, 13}, {50, 0}, {1000, 0}} {
		got, err := h.log.ReadFrom(ctx, uint64(c.from), c.max)
		if err != nil {
			t.Fatalf("ReadFrom(%d, %d) through a consumer: %v", c.from, c.max, err)
		}
		want, err := direct.ReadFrom(ctx, uint64(c.from), c.max)
		if err != nil {
			t.Fatalf("ReadFrom(%d, %d) by direct gets: %v", c.from, c.max, err)
		}
		if len(got) != len(want) {
			t.Fatalf("ReadFrom(%d, %d): %d records through a consumer, %d by direct gets", c.from, c.max, len(got), len(want))
		}
		for i := range got {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("ReadFrom(%d, %d) record %d: through a consumer %+v, by direct gets %+v", c.from, c.max, i, got[i], want[i])
			}
		}
	}
	if all, _ := h.log.ReadFrom(ctx, 0, 0); len(all) != 40 {
		t.Fatalf("the whole log: %d records, want 40", len(all))
	}
	if h.log.consumers.reads.Load() == 0 || direct.consumers.reads.Load() != 0 {
		t.Fatalf("reads through a consumer: %d by the log of small batches, %d by the other; want some and none",
			h.log.consumers.reads.Load(), direct.consumers.reads.Load())
	}
	for _, c := range []struct {
		after uint64
		limit int
	}{{0, 50}, {0, 1000}, {5, 20}} {
		gotEv, gotNext, err := h.log.ReadAfter(ctx, c.after, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		wantEv, wantNext, err := direct.ReadAfter(ctx, c.after, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(gotEv) != len(wantEv) || gotNext != wantNext {
			t.Fatalf("ReadAfter(%d, %d): %d events to %d through a consumer, %d to %d by direct gets", c.after, c.limit, len(gotEv), gotNext, len(wantEv), wantNext)
		}
		for i := range gotEv {
			if gotEv[i].Position != wantEv[i].Position || gotEv[i].Event.ID != wantEv[i].Event.ID {
				t.Fatalf("ReadAfter(%d, %d) event %d differs", c.after, c.limit, i)
			}
		}
	}
}

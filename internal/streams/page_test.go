package streams

import (
	"fmt"
	"math/bits"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/esjet/esjet/internal/natstest"
)

// TestPageCostsWhatItReturnsPlusABoundedSeek is issue 28 item 5: each page
// of an aggregate's history read the whole aggregate (a 100k-event one read
// 1,000 times over to page through it). On a 1,200-event aggregate (1 to 3
// events a decision, other aggregates' messages between, foreign messages
// on its subject), every page of 25 reads at most its own messages plus
// about two per halving of the subject's sequence range, and the pages put
// together are the aggregate's history as a whole load reads it.
func TestPageCostsWhatItReturnsPlusABoundedSeek(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	h := provisioned([]*server.Server{s}, 1)(t, Config{})
	ctx := t.Context()
	var pos Position
	foreign := 0
	for i := 0; pos.Version < 1200; i++ {
		d := decision("acct", "a", make([]string, 1+i%3)...)
		for j := range d.Events {
			d.Events[j].Type = fmt.Sprintf("moved%d", j)
		}
		pos = mustAppend(t, h, d, pos).Position()
		if i%40 == 0 {
			pad(t, h, 30)
		}
		if i%150 == 7 { // a stray message the next append expects
			ack, err := h.js.Publish(ctx, h.ns+".evt.acct.a", []byte("hello"))
			if err != nil {
				t.Fatal(err)
			}
			pos.Seq = ack.Sequence
			foreign++
		}
	}
	whole, err := h.log.LoadTail(ctx, aggRef("acct", "a"), Position{})
	if err != nil {
		t.Fatal(err)
	}
	seek := uint64(2*bits.Len64(pos.Seq) + 4)
	const limit = 25
	var versions []uint64
	var foreignSeen []uint64
	pages, maxRead := 0, uint64(0)
	for after := uint64(0); ; {
		before := h.log.getter.read.Load()
		p, err := h.log.LoadPage(ctx, "acct", "a", after, limit)
		if err != nil {
			t.Fatalf("page after %d: %v", after, err)
		}
		read := h.log.getter.read.Load() - before
		pages++
		maxRead = max(maxRead, read)
		if p.Now != whole.Position(Position{}) {
			t.Fatalf("page after %d: now %+v, want %+v", after, p.Now, whole.Position(Position{}))
		}
		if read > uint64(limit+1+len(p.Foreign))+seek {
			t.Fatalf("page after %d read %d messages for %d records and %d foreign (seek budget %d)", after, read, len(p.Records), len(p.Foreign), seek)
		}
		n := 0
		for _, r := range p.Records {
			for _, e := range r.Events {
				if e.Version > after && n < limit {
					versions = append(versions, e.Version)
					n++
				}
			}
		}
		for _, f := range p.Foreign {
			if len(foreignSeen) == 0 || f.Seq > foreignSeen[len(foreignSeen)-1] {
				foreignSeen = append(foreignSeen, f.Seq)
			}
		}
		if n == 0 {
			break
		}
		after = versions[len(versions)-1]
	}
	t.Logf("%d pages of %d events over %d messages of the log: at most %d messages read a page", pages, limit, pos.Seq, maxRead)
	if pages < 1200/limit {
		t.Fatalf("%d pages of %d for 1,200 events", pages, limit)
	}
	for i, v := range versions {
		if v != uint64(i)+1 {
			t.Fatalf("paged versions are not 1..%d in order: %d at %d", pos.Version, v, i)
		}
	}
	if uint64(len(versions)) != pos.Version || len(foreignSeen) != foreign || len(whole.Foreign) != foreign {
		t.Fatalf("pages hold %d versions and %d foreign messages; want %d and %d", len(versions), len(foreignSeen), pos.Version, foreign)
	}
	// A page after the last version is empty, an aggregate without
	// messages has no page.
	if p, err := h.log.LoadPage(ctx, "acct", "a", pos.Version, limit); err != nil || len(p.Records) != 1 || p.Records[0].LastVersion() != pos.Version {
		t.Fatalf("page after the last version: %+v, %v; want the last decision alone", p.Records, err)
	}
	if p, err := h.log.LoadPage(ctx, "acct", "none", 0, limit); err != nil || p.Now.Seq != 0 || len(p.Records) != 0 {
		t.Fatalf("page of an empty aggregate: %+v, %v", p, err)
	}
}

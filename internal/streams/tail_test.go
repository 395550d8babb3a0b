package streams

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/internal/natstest"
)

// getLog records the direct get requests sent to a stream.
type getLog struct {
	nc     *nats.Conn // the reader's: marks go on it after the reads
	stream string
	mu     sync.Mutex
	reqs   []batchRequest
	marked bool
}

// watchGets watches the direct gets that reader's connection sends.
func watchGets(t *testing.T, s *server.Server, reader *nats.Conn, stream string) *getLog {
	t.Helper()
	nc, _ := natstest.Connect(t, s)
	g := &getLog{nc: reader, stream: stream}
	if _, err := nc.Subscribe("$JS.API.DIRECT.GET."+stream, func(m *nats.Msg) {
		g.mu.Lock()
		defer g.mu.Unlock()
		var r batchRequest
		if string(m.Data) == "mark" {
			g.marked = true
		} else if json.Unmarshal(m.Data, &r) == nil {
			g.reqs = append(g.reqs, r)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return g
}

// take returns the requests sent since the last take: a mark published on
// the reader's connection after them reaches the watcher after them.
func (g *getLog) take(t *testing.T) []batchRequest {
	t.Helper()
	if err := g.nc.Publish("$JS.API.DIRECT.GET."+g.stream, []byte("mark")); err != nil {
		t.Fatal(err)
	}
	var got []batchRequest
	natstest.Eventually(t, 5*time.Second, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		if !g.marked {
			return false
		}
		got, g.reqs, g.marked = g.reqs, nil, false
		return true
	})
	return got
}

// pad publishes n messages of other aggregates' subjects: the log between
// two of one aggregate's decisions.
func pad(t *testing.T, h *harness, n int) {
	t.Helper()
	for i := range n {
		if _, err := h.js.PublishAsync(fmt.Sprintf("%s.evt.pad.p%d", h.ns, i%50), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-h.js.PublishAsyncComplete():
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
}

// TestLoadOfASparseAggregateReadsItsOwnMessagesOnly: an aggregate whose
// decisions lie far apart in the log is read message by message, backwards
// along the expectations its appends left, with one direct get per message
// and no subject-filtered batch (which makes the server walk the subject
// index of every block in between). Whole, after a snapshot's position,
// and after a sequence alone, it reads the same records as before.
func TestLoadOfASparseAggregateReadsItsOwnMessagesOnly(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	h := provisioned([]*server.Server{s}, 1)(t, Config{})
	var recs []Record
	var pos Position
	for i := range 6 {
		pad(t, h, 600)
		r := mustAppend(t, h, decision("acct", "a", fmt.Sprintf("moved%d", i)), pos)
		recs, pos = append(recs, r), r.Position()
	}
	pad(t, h, 600)
	gets := watchGets(t, s, h.nc, h.log.Names().Events)
	noBatch := func(reqs []batchRequest) error {
		for _, r := range reqs {
			if r.Batch > 0 {
				return fmt.Errorf("a batched get %+v", r)
			}
		}
		return nil
	}

	for _, c := range []struct {
		name  string
		after Position
		want  int // records
	}{
		{"whole", Position{}, 6},
		{"after a snapshot at version 2", recs[1].Position(), 4},
		{"after a sequence alone", Position{Seq: recs[3].Seq}, 2},
		{"after the last", pos, 0},
	} {
		got, err := h.log.Load(t.Context(), "acct", "a", c.after)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(got) != c.want {
			t.Fatalf("%s: %d records, want %d", c.name, len(got), c.want)
		}
		for i, r := range got {
			want := recs[len(recs)-c.want+i]
			if r.Seq != want.Seq || r.ID != want.ID || r.FirstVersion() != want.FirstVersion() {
				t.Fatalf("%s: record %d is seq %d version %d, want seq %d version %d", c.name, i, r.Seq, r.FirstVersion(), want.Seq, want.FirstVersion())
			}
		}
		// The last message, then one get per record before it.
		reqs := gets.take(t)
		if err := noBatch(reqs); err != nil || len(reqs) > max(c.want, 1) {
			t.Fatalf("%s: %d gets (%v) for %d records: %+v", c.name, len(reqs), err, c.want, reqs)
		}
	}
}

// TestLoadOfASparseAggregateStepsOverAForeignMessage: a message esjet did
// not write, on the aggregate's subject between two far-apart decisions,
// carries no expectation: the walk stops at it and the rest is read the
// old way, foreign message included.
func TestLoadOfASparseAggregateStepsOverAForeignMessage(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	h := provisioned([]*server.Server{s}, 1)(t, Config{})
	first := mustAppend(t, h, decision("acct", "b", "opened"), Position{})
	pad(t, h, 600)
	ack, err := h.js.Publish(t.Context(), h.ns+".evt.acct.b", []byte("stray"))
	if err != nil {
		t.Fatal(err)
	}
	pad(t, h, 600)
	second := mustAppend(t, h, decision("acct", "b", "moved"), Position{Seq: ack.Sequence, Version: 1})
	pad(t, h, 600)
	third := mustAppend(t, h, decision("acct", "b", "moved"), second.Position())

	tail, err := h.log.LoadTail(t.Context(), aggRef("acct", "b"), Position{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tail.Records) != 3 || tail.Records[0].Seq != first.Seq || tail.Records[1].Seq != second.Seq || tail.Records[2].Seq != third.Seq {
		t.Fatalf("records %+v, want the three decisions", tail.Records)
	}
	if len(tail.Foreign) != 1 || tail.Foreign[0].Seq != ack.Sequence || tail.LastSeq != third.Seq {
		t.Fatalf("foreign %+v last %d, want the stray message at %d and last %d", tail.Foreign, tail.LastSeq, ack.Sequence, third.Seq)
	}
}

// TestLoadOfADenseAggregateIsOneRangeRead: decisions next to each other in
// the log (one busy aggregate) are read with one unfiltered range read,
// not one get per decision.
func TestLoadOfADenseAggregateIsOneRangeRead(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	h := provisioned([]*server.Server{s}, 1)(t, Config{})
	var pos Position
	for i := range 40 {
		r := mustAppend(t, h, decision("acct", "c", fmt.Sprintf("moved%d", i)), pos)
		pos = r.Position()
		if i%4 == 0 {
			mustAppend(t, h, decision("acct", fmt.Sprintf("o%d", i), "opened"), Position{})
		}
	}
	gets := watchGets(t, s, h.nc, h.log.Names().Events)
	got, err := h.log.Load(t.Context(), "acct", "c", Position{})
	if err != nil || len(got) != 40 || got[39].Seq != pos.Seq {
		t.Fatalf("load: %d records, %v", len(got), err)
	}
	reqs := gets.take(t)
	if len(reqs) != 2 || reqs[1].Batch == 0 || reqs[1].NextFor != "" {
		t.Fatalf("gets %+v, want the last message and one unfiltered range read", reqs)
	}
}

// TestLoadOfALongTailInFewBlocksIsOneFilteredRead: an aggregate with many
// versions spread over a stretch of the log too sparse for a range read but
// far shorter than a block per few versions is read with a subject-filtered
// batch, not one get per version (a 1,000-version aggregate without
// snapshots took 1,000 round trips); one with few versions far apart is
// still walked.
func TestLoadOfALongTailInFewBlocksIsOneFilteredRead(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	h := provisioned([]*server.Server{s}, 1)(t, Config{})
	var recs []Record
	var pos Position
	for i := range 40 {
		pad(t, h, 5)
		r := mustAppend(t, h, decision("acct", "d", fmt.Sprintf("moved%d", i)), pos)
		recs, pos = append(recs, r), r.Position()
	}
	gets := watchGets(t, s, h.nc, h.log.Names().Events)
	subject := h.ns + ".evt.acct.d"
	for _, c := range []struct {
		name  string
		after Position
		want  int
	}{
		{"whole", Position{}, 40},
		{"after a snapshot at version 10", recs[9].Position(), 30},
	} {
		got, err := h.log.Load(t.Context(), "acct", "d", c.after)
		if err != nil || len(got) != c.want {
			t.Fatalf("%s: %d records, %v; want %d", c.name, len(got), err, c.want)
		}
		for i, r := range got {
			if want := recs[len(recs)-c.want+i]; r.Seq != want.Seq || r.FirstVersion() != want.FirstVersion() {
				t.Fatalf("%s: record %d is seq %d version %d, want seq %d version %d", c.name, i, r.Seq, r.FirstVersion(), want.Seq, want.FirstVersion())
			}
		}
		reqs := gets.take(t)
		if len(reqs) != 2 || reqs[1].NextFor != subject || reqs[1].Batch == 0 {
			t.Fatalf("%s: gets %+v, want the last message and one filtered read", c.name, reqs)
		}
	}
	// Few versions left: stepping back costs fewer round trips.
	got, err := h.log.Load(t.Context(), "acct", "d", recs[35].Position())
	if err != nil || len(got) != 4 {
		t.Fatalf("after version 36: %d records, %v", len(got), err)
	}
	reqs := gets.take(t)
	for _, r := range reqs {
		if r.NextFor != "" {
			t.Fatalf("after version 36: gets %+v, want steps back, no filtered read", reqs)
		}
	}
	if len(reqs) < 4 {
		t.Fatalf("after version 36: gets %+v, want the last and steps back", reqs)
	}
}

// TestGroupCommittedDecisionsKeepTheirExpectation: the walk steps back
// along Nats-Expected-Last-Subject-Sequence, so the server must store it
// on decisions committed in an atomic batch too, and a load of aggregates
// written that way reads them one get per decision.
func TestGroupCommittedDecisionsKeepTheirExpectation(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	h := provisioned([]*server.Server{s}, 1)(t, Config{GroupCommit: GroupCommit{MinBatch: 2}})
	const n = 4
	afters := make([]Position, n)
	for round := range 3 {
		pad(t, h, 300)
		ds := make([]Decision, n)
		for i := range ds {
			ds[i] = decision("order", fmt.Sprintf("g%d", i), fmt.Sprintf("step%d", round))
		}
		recs, errs := queued(t, h, ds, afters)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d append %d: %v", round, i, err)
			}
			afters[i] = recs[i].Position()
		}
	}
	if st := h.log.CommitStats(); st.Batches < 3 {
		t.Fatalf("stats %+v, want the rounds committed as batches", st)
	}
	gets := watchGets(t, s, h.nc, h.log.Names().Events)
	for i := range n {
		got, err := h.log.Load(t.Context(), "order", fmt.Sprintf("g%d", i), Position{})
		if err != nil || len(got) != 3 || got[2].Seq != afters[i].Seq {
			t.Fatalf("load g%d: %d records, %v", i, len(got), err)
		}
		if reqs := gets.take(t); len(reqs) != 3 {
			t.Fatalf("load g%d: %d gets %+v, want 3 (the last, then two steps back)", i, len(reqs), reqs)
		}
	}
}

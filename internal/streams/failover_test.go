package streams

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
)

// A stream leader that is frozen (a stopped process, a VM pause, a
// partition that keeps TCP up) keeps its subscription on the other
// servers until their route to it times out, minutes later: a publish sent
// before a new leader is elected goes to it alone and waits for nothing.
// Once the new leader is elected every publish also reaches it. So a
// retry must not wait the whole first attempt's timeout again: measured on
// a 3-server cluster with the EVENTS leader SIGSTOPped, appends came back
// 10–15 s after the stop although a new leader was elected after 5–7 s.
//
// Here a subscriber that never answers stands for the frozen leader until
// the stream takes the subject back (the election): the append must land
// soon after, not when a try's full timeout has run out, and must not give
// up sooner than three full tries would have.
func TestAppendRetryReachesANewLeaderSoon(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	// elected: when the stream takes the subject back, after the start.
	for _, c := range []struct {
		name             string
		timeout, elected time.Duration
	}{
		{"elected during the second try", 6 * time.Second, 7500 * time.Millisecond},
		{"elected after three tries: the shorter ones go on as long as three full ones would", 4 * time.Second, 9 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testAppendAfterElection(t, provisioned([]*server.Server{s}, 1)(t, Config{AppendTimeout: c.timeout}), c.elected)
		})
	}
}

func testAppendAfterElection(t *testing.T, h *harness, electAfter time.Duration) {
	names := h.log.Names()
	st, err := h.js.Stream(t.Context(), names.Events)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	away := cfg
	away.Subjects = []string{h.ns + ".elsewhere.>"}
	if _, err := h.js.UpdateStream(t.Context(), away); err != nil {
		t.Fatal(err)
	}
	frozen, err := h.nc.Subscribe(names.EventsFilter(), func(*nats.Msg) {}) // takes every publish, answers none
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = frozen.Unsubscribe() }()
	if err := h.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	type result struct {
		err error
		at  time.Duration
	}
	done := make(chan result, 1)
	start := time.Now()
	d := decision("trip", "f1", "requested")
	go func() {
		_, err := h.log.Append(t.Context(), d, Position{})
		done <- result{err, time.Since(start)}
	}()
	time.Sleep(electAfter)
	if _, err := h.js.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	elected := time.Since(start)
	r := <-done
	if r.err != nil {
		t.Fatalf("append (new leader after %s): %v", elected.Round(time.Millisecond), r.err)
	}
	t.Logf("new leader after %s; append landed after %s", elected.Round(time.Millisecond), r.at.Round(time.Millisecond))
	if late := r.at - elected; late > 2500*time.Millisecond {
		t.Fatalf("the append landed %s after the new leader took the subject: its retry waited out a full attempt on the frozen one", late.Round(time.Millisecond))
	}
	if n := msgCount(t, h); n != 1 {
		t.Fatalf("EVENTS holds %d messages, want 1", n)
	}
}

// A direct get is answered by any replica in sync, drawn from a queue
// group, and a frozen replica stays in that group on the other servers for
// minutes: a read that drew it must be sent again after a short wait, not
// wait out its whole timeout. Here the getter's requests pass through a
// stand-in that swallows the first one (the frozen replica drew it) and
// forwards the rest to the stream.
func TestReadNotStuckOnAFrozenReplica(t *testing.T) {
	t.Parallel()
	h := provisioned([]*server.Server{natstest.RunServer(t)}, 1)(t, Config{})
	rec := mustAppend(t, h, decision("trip", "r1", "requested"), Position{})
	g := newBatchGetter(h.js, h.log.Names().Events)
	real := g.subject
	g.subject = h.ns + ".frozen-or-not"
	var n atomic.Int64
	sub, err := h.nc.Subscribe(g.subject, func(m *nats.Msg) {
		if n.Add(1) == 1 {
			return // drawn by the frozen replica
		}
		_ = h.nc.PublishRequest(real, m.Reply, m.Data)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := h.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
	defer cancel()
	start := time.Now()
	var seqs []uint64
	_, _, err = g.get(ctx, batchRequest{Seq: 1, NextFor: rec.Subject, Batch: 10}, func(m *jetstream.RawStreamMsg) error {
		seqs = append(seqs, m.Sequence)
		return nil
	})
	if err != nil {
		t.Fatalf("read after %s (%d requests): %v", time.Since(start).Round(time.Millisecond), n.Load(), err)
	}
	if len(seqs) != 1 || seqs[0] != rec.Seq {
		t.Fatalf("read seqs %v, want [%d]", seqs, rec.Seq)
	}
	t.Logf("read after %s, %d requests", time.Since(start).Round(time.Millisecond), n.Load())
}

// A server that is only slow — a batch that walks a large store's blocks
// can take seconds on a loaded machine, and one connection's requests are
// served one after another — answers the first try after the getter has
// sent others: that reply is read, not dropped for the newest try's.
// Here a stand-in forwards each request to the stream only after holding
// it three times as long as the getter's first wait, one at a time.
func TestReadFinishesOnASlowServer(t *testing.T) {
	t.Parallel()
	h := provisioned([]*server.Server{natstest.RunServer(t)}, 1)(t, Config{})
	rec := mustAppend(t, h, decision("trip", "s1", "requested"), Position{})
	g := newBatchGetter(h.js, h.log.Names().Events)
	g.try = 100 * time.Millisecond
	real := g.subject
	g.subject = h.ns + ".slow"
	var n atomic.Int64
	sub, err := h.nc.Subscribe(g.subject, func(m *nats.Msg) {
		n.Add(1)
		time.Sleep(3 * g.try) // the slow walk; the callback serves requests one at a time
		_ = h.nc.PublishRequest(real, m.Reply, m.Data)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := h.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var seqs []uint64
	_, _, err = g.get(ctx, batchRequest{Seq: 1, NextFor: rec.Subject, Batch: 10}, func(m *jetstream.RawStreamMsg) error {
		seqs = append(seqs, m.Sequence)
		return nil
	})
	if err != nil {
		t.Fatalf("read on a slow server (%d tries): %v", n.Load(), err)
	}
	if len(seqs) != 1 || seqs[0] != rec.Seq {
		t.Fatalf("read seqs %v, want [%d] once", seqs, rec.Seq)
	}
}

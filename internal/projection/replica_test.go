package projection

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// TestAReadAfterPNeverAnswersFromAReplicaBehind: on an R3 view bucket the
// checkpoints and the document are read by direct get, which any copy of
// the bucket in sync answers from what it has. Here a third of the reader's
// direct gets of the bucket are answered by a copy held behind for good, at
// the first event: the reader's connection sends them to a stream that
// stopped sourcing the bucket after the first event (lagConn) — what a
// follower a moment behind answers, made to last. (A follower cannot be
// held behind on cue in one process, and a client may not join the
// servers' direct get group.) Reads after the second event's position must
// never answer the first document: reading the checkpoints from a copy in
// sync and the document from the one behind did, about one read in three.
func TestAReadAfterPNeverAnswersFromAReplicaBehind(t *testing.T) {
	t.Parallel()
	servers := natstest.RunCluster(t)
	_, jsW := natstest.Connect(t, servers[0])
	ctx := t.Context()
	ns := natstest.Namespace(t)
	if _, err := streams.Provision(ctx, jsW, ns, streams.ProvisionConfig{Replicas: 3}, nil); err != nil {
		t.Fatal(err)
	}
	l, err := streams.Open(ctx, jsW, ns, streams.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{js: jsW, log: l, ns: ns, pos: map[string]streams.Position{}}
	cfg := testConfig()
	cfg.Replicas = 3
	// An R3 bucket made a moment ago may answer its first direct gets
	// "no responders": let the control bucket settle before the runner
	// reads it.
	ctl, err := ensureBucket(ctx, jsW, wire.ProjectionsBucket(ns), 3, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, func() bool {
		_, err := ctl.Get(ctx, "settled")
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
	stop := e.run(t, cfg, counter("c"))

	bucket := ViewBucket(ns, "c", 1)
	kvs := wire.KVStream(bucket)
	p1 := e.append(t, "order", "o1", "placed").LastPosition()
	eventually(t, "the view passed the first event", func() bool { return e.checkpoint(t, "c", 1, 0).Position >= p1 })

	// The copy: sources the bucket until it holds the first document and
	// its checkpoint, then sources nothing.
	frozen := "FROZEN_" + ns
	fcfg := jetstream.StreamConfig{Name: frozen, AllowDirect: true, Sources: []*jetstream.StreamSource{{Name: kvs}}}
	if _, err := jsW.CreateStream(ctx, fcfg); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the copy holds the first document", func() bool {
		st, err := jsW.Stream(ctx, frozen)
		if err != nil {
			return false
		}
		_, errDoc := st.GetLastMsgForSubject(ctx, wire.KVSubject(bucket, "o1"))
		m, errCP := st.GetLastMsgForSubject(ctx, wire.KVSubject(bucket, cpKey(0)))
		return errDoc == nil && errCP == nil && strings.Contains(string(m.Data), `"position"`)
	})
	fcfg.Sources = []*jetstream.StreamSource{{Name: kvs, FilterSubject: wire.KVSubject(bucket, "nothing_matches")}}
	if _, err := jsW.UpdateStream(ctx, fcfg); err != nil {
		t.Fatal(err)
	}

	p2 := e.append(t, "order", "o1", "shipped").LastPosition()
	eventually(t, "the view passed the second event", func() bool { return e.checkpoint(t, "c", 1, 0).Position >= p2 })
	if n := e.count(t, "c", "o1"); n != 2 {
		t.Fatalf("o1 counts %d, want 2", n)
	}
	// No more writes: the owner may go (its reads would meet the copy
	// too); a read waits up to the Views' lease TTL for a new owner.
	stop()
	if st, err := jsW.Stream(ctx, frozen); err != nil || st.CachedInfo().State.Msgs == 0 {
		t.Fatalf("the copy: %v", err)
	}
	if m, err := mustStream(t, jsW, frozen).GetLastMsgForSubject(ctx, wire.KVSubject(bucket, "o1")); err != nil || string(m.Data) != "1" {
		t.Fatalf("the copy holds o1 = %v (%v), want the first document 1", m, err)
	}

	// The reader's connection sends a third of the bucket's direct gets
	// to the copy.
	lag := &lagDialer{from: "$JS.API.DIRECT.GET." + kvs, to: "$JS.API.DIRECT.GET." + frozen}
	ncR, err := nats.Connect(servers[1].ClientURL(), nats.SetCustomDialer(lag))
	if err != nil {
		t.Fatal(err)
	}
	defer ncR.Close()
	jsR, err := jetstream.New(ncR)
	if err != nil {
		t.Fatal(err)
	}
	v := NewViews(jsR, ns, time.Minute)
	stale := 0
	const reads = 60
	for range reads {
		d, err := v.Get(ctx, "c", "o1", Wait{After: p2, For: 20 * time.Second})
		if err != nil {
			t.Fatalf("read after %d: %v", p2, err)
		}
		if string(d.Value) != "2" {
			stale++
			t.Errorf("read after %d answered o1 = %s at position %d: the first document, from the copy behind", p2, d.Value, d.Position)
		}
	}
	if lag.sent.Load() == 0 {
		t.Fatal("the copy behind answered no get: the test tested nothing")
	}
	t.Logf("%d reads after P, %d gets sent to the copy behind, %d stale answers", reads, lag.sent.Load(), stale)
}

func mustStream(t *testing.T, js jetstream.JetStream, name string) jetstream.Stream {
	t.Helper()
	st, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

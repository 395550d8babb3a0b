package archive_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/archive"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/wire"
)

func passBucket(t *testing.T) jetstream.KeyValue {
	t.Helper()
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv)
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: natstest.Namespace(t) + "_workers"})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

func writePass(t *testing.T, kv jetstream.KeyValue, rec archive.PassRecord) {
	t.Helper()
	b, _ := json.Marshal(rec)
	if _, err := kv.Put(t.Context(), wire.ArchivePassKey, b); err != nil {
		t.Fatal(err)
	}
}

func readPass(t *testing.T, kv jetstream.KeyValue) archive.PassRecord {
	t.Helper()
	rec, _, err := archive.ReadPass(t.Context(), kv)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestOneNodeOfTheFleetRunsAPassAndTheNextWaitsUntilItIsDue(t *testing.T) {
	kv := passBucket(t)
	var running, most, runs atomic.Int32
	release := make(chan struct{})
	pass := func(ctx context.Context, progress func(archive.Progress)) (archive.Progress, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		runs.Add(1)
		<-release
		return archive.Progress{Archived: 3, Seen: 5}, nil
	}
	var scheds []*archive.Schedule
	for _, id := range []string{"n1", "n2", "n3"} {
		scheds = append(scheds, archive.NewSchedule(kv, pass, archive.ScheduleConfig{Every: time.Hour, NodeID: id}, nil))
	}
	var wg sync.WaitGroup
	for _, s := range scheds {
		wg.Go(func() {
			if _, err := s.Tick(t.Context()); err != nil {
				t.Errorf("tick: %v", err)
			}
		})
	}
	natstest.Eventually(t, 5*time.Second, func() bool { return runs.Load() == 1 && readPass(t, kv).Owner != "" })
	// The others have looked, found it running, and left.
	time.Sleep(200 * time.Millisecond)
	close(release)
	wg.Wait()
	if most.Load() != 1 || runs.Load() != 1 {
		t.Fatalf("%d passes ran, at most %d at once; want 1 pass", runs.Load(), most.Load())
	}
	rec := readPass(t, kv)
	if rec.Owner != "" || rec.Last == nil || rec.Last.Archived != 3 || rec.Ended.IsZero() || rec.By == "" {
		t.Fatalf("record after the pass: %+v", rec)
	}
	// The next pass is due in an hour: nobody runs one now.
	for _, s := range scheds {
		if ok, err := s.Tick(t.Context()); ok || err != nil {
			t.Fatalf("a pass right after one ended: ran %v, %v", ok, err)
		}
	}
	st, err := scheds[0].Status(t.Context())
	if err != nil || st.NextDue == nil || st.NextDue.Sub(rec.Ended) != time.Hour {
		t.Fatalf("status: %+v %v", st, err)
	}
}

func TestAPassCutByAKillIsResumedAtOnceByAnotherNode(t *testing.T) {
	kv := passBucket(t)
	now := time.Now().UTC()
	// n1 began a pass a minute ago, right after the last one ended, and
	// stopped heartbeating (killed) 40s ago.
	writePass(t, kv, archive.PassRecord{Owner: "n1", Heartbeat: now.Add(-40 * time.Second), Started: now.Add(-time.Minute),
		Ended: now.Add(-time.Minute), By: "n0", Last: &archive.Progress{}})
	runs := 0
	s := archive.NewSchedule(kv, func(ctx context.Context, _ func(archive.Progress)) (archive.Progress, error) {
		runs++
		return archive.Progress{Finished: 1}, nil
	}, archive.ScheduleConfig{Every: 24 * time.Hour, NodeID: "n2"}, nil)
	if ok, err := s.Tick(t.Context()); !ok || err != nil || runs != 1 {
		t.Fatalf("a cut pass, not resumed: ran %v (%d), %v", ok, runs, err)
	}
	rec := readPass(t, kv)
	if !rec.Resumed || rec.CutBy != "n1" || rec.By != "n2" || rec.Last.Finished != 1 || rec.Owner != "" {
		t.Fatalf("record after resuming: %+v", rec)
	}
	// A pass whose owner heartbeats is left to it.
	writePass(t, kv, archive.PassRecord{Owner: "n1", Heartbeat: time.Now().UTC(), Started: now})
	if ok, err := s.Tick(t.Context()); ok || err != nil || runs != 1 {
		t.Fatalf("a live pass taken over: ran %v, %v", ok, err)
	}
}

func TestANodeThatMayNotPurgeGivesThePassBack(t *testing.T) {
	kv := passBucket(t)
	denied := archive.NewSchedule(kv, func(ctx context.Context, _ func(archive.Progress)) (archive.Progress, error) {
		return archive.Progress{}, archive.ErrNotAllowed
	}, archive.ScheduleConfig{Every: time.Hour, NodeID: "node-role"}, nil)
	if ok, err := denied.Tick(t.Context()); !ok || !errors.Is(err, archive.ErrNotAllowed) {
		t.Fatalf("tick of a node that may not purge: %v %v", ok, err)
	}
	st, err := denied.Status(t.Context())
	if err != nil || st.NotAllowed == "" {
		t.Fatalf("status of a node that may not purge: %+v %v", st, err)
	}
	// It does not try again within `every`, and the pass is still due
	// for a node that may.
	if ok, _ := denied.Tick(t.Context()); ok {
		t.Fatal("a node that may not purge took the pass again at once")
	}
	runs := 0
	admin := archive.NewSchedule(kv, func(ctx context.Context, _ func(archive.Progress)) (archive.Progress, error) {
		runs++
		return archive.Progress{}, nil
	}, archive.ScheduleConfig{Every: time.Hour, NodeID: "admin"}, nil)
	if ok, err := admin.Tick(t.Context()); !ok || err != nil || runs != 1 {
		t.Fatalf("the admin node after a denied one: ran %v (%d), %v", ok, runs, err)
	}
}

func TestAPassWhoseRecordIsTakenStops(t *testing.T) {
	kv := passBucket(t)
	started := make(chan struct{})
	stopped := make(chan error, 1)
	s := archive.NewSchedule(kv, func(ctx context.Context, _ func(archive.Progress)) (archive.Progress, error) {
		close(started)
		<-ctx.Done()
		stopped <- ctx.Err()
		return archive.Progress{}, ctx.Err()
	}, archive.ScheduleConfig{Every: time.Hour, NodeID: "stalled", LeaseTTL: 600 * time.Millisecond}, nil)
	done := make(chan error, 1)
	go func() { _, err := s.Tick(t.Context()); done <- err }()
	<-started
	// Another node took the record (this one looked dead to it).
	writePass(t, kv, archive.PassRecord{Owner: "other", Heartbeat: time.Now().UTC(), Started: time.Now().UTC()})
	select {
	case err := <-stopped:
		if err == nil {
			t.Fatal("the pass's context ended without an error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a pass whose record another node took went on")
	}
	if err := <-done; err == nil {
		t.Fatal("tick of a pass that lost its record: no error")
	}
	if rec := readPass(t, kv); rec.Owner != "other" {
		t.Fatalf("the stalled node overwrote the record: %+v", rec)
	}
}

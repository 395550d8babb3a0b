package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"
)

// held is a view whose documents partitions share (a total across every
// aggregate) and whose partition holding aggregate "slow" blocks on its
// events until release is closed.
func held(name string, release <-chan struct{}) Definition {
	return Definition{Name: name, Partitions: 2, Handle: func(ctx context.Context, tx *Tx, e Event) error {
		if e.AggregateID == "slow" {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		var n int
		if _, err := tx.Get("total", &n); err != nil {
			return err
		}
		return tx.Put("total", n+1)
	}}
}

// TestAReadAfterPWaitsForEveryPartitionOfASharedDocument: the shared
// document "total" depends on both partitions; a read after a position of
// the fast partition's aggregate must not answer while the other
// partition has not applied its earlier event, and the document's
// position never claims more than every partition holds.
func TestAReadAfterPWaitsForEveryPartitionOfASharedDocument(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Two aggregates in different partitions.
	fast := ""
	for i := range 64 {
		id := fmt.Sprint("fast", i)
		if PartitionOf(e.ns+".evt.order."+id, 2) != PartitionOf(e.ns+".evt.order.slow", 2) {
			fast = id
			break
		}
	}
	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	e.run(t, testConfig(), held("shared", release))
	e.append(t, "order", "slow", "placed")
	p := e.append(t, "order", fast, "placed").LastPosition()
	v := NewViews(e.js, e.ns, 0)
	eventually(t, "the fast partition passed P", func() bool {
		part := PartitionOf(e.ns+".evt.order."+fast, 2)
		return e.checkpoint(t, "shared", 1, part).Position >= p
	})
	d, err := v.Get(t.Context(), "shared", "total", Wait{After: p, For: 300 * time.Millisecond})
	if err == nil {
		t.Fatalf("read after %d answered %s (position %d) while the slow partition still holds an earlier event", p, d.Value, d.Position)
	}
	if !errors.Is(err, ErrNotYet) {
		t.Fatalf("read after %d: %v, want ErrNotYet", p, err)
	}
	// Without a wait the document answers, and its position does not claim P.
	d, err = v.Get(t.Context(), "shared", "total", Wait{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Position >= p {
		t.Fatalf("document %s reports position %d ≥ %d, yet the slow event before it is not in the view", d.Value, d.Position, p)
	}
	close(release)
	d, err = v.Get(t.Context(), "shared", "total", Wait{After: p, For: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := strconv.Atoi(string(d.Value)); n != 2 || d.Position < p {
		t.Fatalf("read after %d: total %s at position %d, want 2 at ≥ %d", p, d.Value, d.Position, p)
	}
}

// memSink is a Sink in memory.
type memSink struct {
	mu  sync.Mutex
	pos uint64
}

func (s *memSink) Position(context.Context) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pos, nil
}

func (s *memSink) Apply(_ context.Context, from, to uint64, _ []Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pos != from {
		return ErrFenced
	}
	s.pos = to
	return nil
}

// TestAViewInYourOwnStoreSaysSoInsteadOfAnswering: esjet holds no document
// of a Sink projection, so a read (with or without a position) is refused
// with ErrOwnStore, not answered from nothing.
func TestAViewInYourOwnStoreSaysSoInsteadOfAnswering(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sink := &memSink{}
	e.run(t, testConfig(), Definition{Name: "mine", Sink: sink})
	p := e.append(t, "order", "o1", "placed").LastPosition()
	eventually(t, "the sink passed P", func() bool { pos, _ := sink.Position(t.Context()); return pos >= p })
	v := NewViews(e.js, e.ns, 0)
	if _, err := v.Get(t.Context(), "mine", "o1", Wait{After: p}); !errors.Is(err, ErrOwnStore) {
		t.Fatalf("read after P of a Sink view: %v, want ErrOwnStore", err)
	}
	if _, err := v.List(t.Context(), "mine", ListQuery{}); !errors.Is(err, ErrOwnStore) {
		t.Fatalf("list of a Sink view: %v, want ErrOwnStore", err)
	}
}

// TestAReadAfterPWaitsForTheHandoverOfASilentOwner: the owner of a
// partition is gone without letting its lease go (killed: the lease
// stays, its heartbeat ages) and a node starting meanwhile takes the
// lease once it is free. A read after P that begins in between waits for
// the handover instead of saying no node runs the view.
func TestAReadAfterPWaitsForTheHandoverOfASilentOwner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := testConfig()
	stop := e.run(t, cfg, counter("c"))
	e.append(t, "order", "o1", "placed")
	eventually(t, "the first event applied", func() bool { return e.count(t, "c", "o1") == 1 })
	stop()
	p := e.append(t, "order", "o1", "shipped").LastPosition()
	v := NewViews(e.js, e.ns, cfg.LeaseTTL)
	cs, ctl, err := v.control(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	// A stop lets the lease go; a kill leaves it, silent for a lease TTL.
	gone, _ := json.Marshal(Lease{Owner: "killed", Heartbeat: time.Now().Add(-cfg.LeaseTTL - 100*time.Millisecond), State: StateRunning})
	if _, err := cs.kv.Put(t.Context(), leaseKey("c", ctl.Active, 0), gone); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		d   Doc
		err error
	}
	got := make(chan answer, 1)
	go func() {
		d, err := v.Get(t.Context(), "c", "o1", Wait{After: p, For: 20 * time.Second})
		got <- answer{d, err}
	}()
	e.run(t, cfg, counter("c"))
	a := <-got
	if a.err != nil {
		t.Fatalf("read after %d during a handover: %v", p, a.err)
	}
	if string(a.d.Value) != "2" || a.d.Position < p {
		t.Fatalf("read after %d: %s at position %d, want 2 at ≥ %d", p, a.d.Value, a.d.Position, p)
	}
}

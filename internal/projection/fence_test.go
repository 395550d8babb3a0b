package projection

import (
	"errors"
	"fmt"
	"testing"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// TestAPausedOldOwnerThatWakesUpCannotWrite: an owner that read its
// checkpoint and applied events, then paused (a GC pause, SIGSTOP) while
// another node took the partition over, fails its next write with
// ErrFenced and leaves nothing in the view.
func TestAPausedOldOwnerThatWakesUpCannotWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 10 {
		e.append(t, "order", fmt.Sprint("o", i%2), "placed")
	}
	old, err := NewRunner(t.Context(), e.js, e.log, []Definition{counter("fenced")}, testConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &partition{r: old, def: counter("fenced"), gen: 1, part: 0, bucket: ViewBucket(e.ns, "fenced", 1), logger: old.logger}
	if err := p.open(t.Context()); err != nil {
		t.Fatal(err)
	}
	evs, _, err := e.log.ReadAfter(t.Context(), 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, le := range evs {
		if _, err := p.apply(t.Context(), Event{LogEvent: le}); err != nil {
			t.Fatal(err)
		}
		p.pos = le.Position
	}
	// Meanwhile a new owner takes the partition and catches up.
	var last streams.Record
	stop := e.run(t, testConfig(), counter("fenced"))
	last = e.append(t, "order", "o0", "placed")
	eventually(t, "the new owner caught up", func() bool {
		return e.checkpoint(t, "fenced", 1, 0).Position == wire.EndOfSeq(last.Seq)
	})
	stop()
	// The old owner wakes up and writes its batch.
	if err := p.flush(t.Context(), false); !errors.Is(err, ErrFenced) {
		t.Fatalf("the old owner's write: %v, want ErrFenced", err)
	}
	if n := e.count(t, "fenced", "o0"); n != 6 {
		t.Fatalf("o0 counted %d, want 6: the old owner's batch was applied", n)
	}
}

// TestATakeOverFencesEvenBeforeTheNewOwnerProcessesAnything: the new
// owner's first act moves the checkpoint's revision.
func TestATakeOverFencesEvenBeforeTheNewOwnerProcessesAnything(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.append(t, "order", "o1", "placed")
	r, err := NewRunner(t.Context(), e.js, e.log, []Definition{counter("fence2")}, testConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &partition{r: r, def: counter("fence2"), gen: 1, bucket: ViewBucket(e.ns, "fence2", 1), logger: r.logger}
	b := &partition{r: r, def: counter("fence2"), gen: 1, bucket: ViewBucket(e.ns, "fence2", 1), logger: r.logger}
	if err := a.open(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.open(t.Context()); err != nil {
		t.Fatal(err)
	}
	a.pos = wire.EndOfSeq(1)
	if err := a.flush(t.Context(), false); !errors.Is(err, ErrFenced) {
		t.Fatalf("write of the owner taken over: %v, want ErrFenced", err)
	}
}

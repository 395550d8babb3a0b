package aggregate

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
)

// bag has a map in its state and an Evolve that panics on "boom" events:
// what user code will do sooner or later.
type bag struct {
	Items map[string]int `json:"items"`
}

func bagDef() *Definition {
	d := Define("bag", 1, func(s bag, e Event) bag {
		if e.Type == "boom" {
			panic("evolve exploded")
		}
		if s.Items == nil {
			s.Items = map[string]int{}
		}
		var it struct{ Name string }
		_ = e.Decode(&it)
		s.Items[it.Name]++ // mutates in place, as Go code often does
		return s
	})
	On(d, "add", func(s bag, c struct{ Name string }) (Decision, error) { return Emit("added", c), nil })
	On(d, "explode", func(s bag, _ struct{}) (Decision, error) { return Emit("boom", nil), nil })
	On(d, "panic", func(s bag, _ struct{}) (Decision, error) { panic("decide exploded") })
	return d.Definition()
}

func TestStateReadsDoNotRaceWithCommands(t *testing.T) {
	f := newFixture(t, natstest.RunServer(t))
	r := f.repo(t, Config{}, bagDef())
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 25 {
				if _, err := r.Handle(t.Context(), Request{Type: "bag", ID: "b1", Kind: "add", Payload: json.RawMessage(fmt.Sprintf(`{"Name":"n%d"}`, (g+i)%5))}); err != nil {
					t.Error(err)
					return
				}
			}
		})
		wg.Go(func() {
			for range 25 {
				st, err := r.Get(t.Context(), "bag", "b1")
				if errors.Is(err, ErrNotFound) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := json.Marshal(st.Value); err != nil { // what the API does, outside the lock
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	st, err := r.Get(t.Context(), "bag", "b1")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range st.Value.(bag).Items {
		total += n
	}
	if total != 100 {
		t.Fatalf("%d items, want 100", total)
	}
}

func TestPanicsBecomeErrorsAndLeaveTheCacheConsistent(t *testing.T) {
	f := newFixture(t, natstest.RunServer(t))
	r := f.repo(t, Config{}, bagDef())
	if _, err := r.Handle(t.Context(), Request{Type: "bag", ID: "b2", Kind: "add", Payload: json.RawMessage(`{"Name":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Handle(t.Context(), Request{Type: "bag", ID: "b2", Kind: "panic"}); !errors.Is(err, ErrInvalidDecision) {
		t.Fatalf("a panicking Decide: %v, want ErrInvalidDecision", err)
	}
	// The decision is stored, then Evolve panics folding it.
	if _, err := r.Handle(t.Context(), Request{Type: "bag", ID: "b2", Kind: "explode"}); !errors.Is(err, ErrInvalidDecision) {
		t.Fatalf("a panicking Evolve: %v, want ErrInvalidDecision", err)
	}
	// The aggregate cannot be loaded past the poisoned event, and says so
	// every time rather than serving a half-applied state.
	for range 2 {
		if _, err := r.Get(t.Context(), "bag", "b2"); !errors.Is(err, ErrInvalidDecision) {
			t.Fatalf("Get after the panic: %v, want ErrInvalidDecision", err)
		}
	}
}

func TestSnapshotKeepsTheNewestRecentDecisionsAndSaysFromWhen(t *testing.T) {
	base := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	e := &entry{recent: map[string]recentDecision{}}
	for i := range maxRecentInSnapshot + 500 {
		e.recent[fmt.Sprintf("d%d", i)] = recentDecision{Seq: uint64(i + 1), At: base.Add(time.Duration(i) * time.Second)}
	}
	kept, since := newestRecent(e)
	if len(kept) != maxRecentInSnapshot {
		t.Fatalf("kept %d, want %d", len(kept), maxRecentInSnapshot)
	}
	if want := base.Add(500 * time.Second); !since.Equal(want) {
		t.Fatalf("complete since %v, want %v", since, want)
	}
	if _, ok := kept["d499"]; ok {
		t.Fatal("an old decision was kept over a newer one")
	}
	if _, ok := kept[fmt.Sprintf("d%d", maxRecentInSnapshot+499)]; !ok {
		t.Fatal("the newest decision was dropped")
	}
	small := &entry{recent: map[string]recentDecision{"a": {At: base}}}
	if kept, since := newestRecent(small); len(kept) != 1 || !since.IsZero() {
		t.Fatalf("a small set is kept whole: %d, %v", len(kept), since)
	}
}

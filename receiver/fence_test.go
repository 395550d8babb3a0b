package receiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
)

// TestTwoDeliveriesRacingTheOlderFenceIsRefused is issue 11 item 7 at the
// receiver: a worker paused past its lease (fence 6) calls while the
// delivery that replaced it (fence 7) is still running the effect. The
// older attempt is refused at once — it neither runs the effect nor waits
// to be handed the newer one's result — and the effect runs once.
func TestTwoDeliveriesRacingTheOlderFenceIsRefused(t *testing.T) {
	r, _ := newReceiver(t, Config{})
	const key = "trip:t1:2:0"
	release := make(chan struct{})
	running := make(chan struct{})
	var runs counter
	newer := make(chan error, 1)
	go func() {
		_, _, err := r.DoFenced(t.Context(), key, 7, []byte(`{}`), func(context.Context) (json.RawMessage, error) {
			runs.n.Add(1)
			close(running)
			<-release
			return json.RawMessage(`"booked"`), nil
		})
		newer <- err
	}()
	<-running
	_, _, err := r.DoFenced(t.Context(), key, 6, []byte(`{}`), func(context.Context) (json.RawMessage, error) {
		runs.n.Add(1)
		return json.RawMessage(`"booked again"`), nil
	})
	close(release)
	if !errors.Is(err, ErrStale) {
		t.Fatalf("older attempt: err = %v, want ErrStale", err)
	}
	if err := <-newer; err != nil {
		t.Fatal(err)
	}
	if n := runs.n.Load(); n != 1 {
		t.Fatalf("effect ran %d times, want 1", n)
	}
	// Once done, every attempt (older ones too) is answered with the result.
	res, replayed, err := r.DoFenced(t.Context(), key, 6, []byte(`{}`), runs.effect(0))
	if err != nil || !replayed || string(res) != `"booked"` {
		t.Fatalf("after done: %s replayed=%v err=%v, want the result replayed", res, replayed, err)
	}
}

// TestManyRacingDeliveriesApplyOnce: pairs of deliveries of one key with
// fences n and n+1 start together, over and over: each key's effect runs
// once, and an older attempt that lost the race is refused or answered
// with the result, never run.
func TestManyRacingDeliveriesApplyOnce(t *testing.T) {
	r, _ := newReceiver(t, Config{})
	var mu sync.Mutex
	runs := map[string]int{}
	var stale int
	for i := range 30 {
		key := fmt.Sprintf("trip:r%d:1:0", i)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, fence := range []uint64{uint64(2 * i), uint64(2*i + 1)} {
			wg.Go(func() {
				<-start
				_, _, err := r.DoFenced(t.Context(), key, fence+1, nil, func(context.Context) (json.RawMessage, error) {
					mu.Lock()
					runs[key]++
					mu.Unlock()
					time.Sleep(5 * time.Millisecond)
					return json.RawMessage(`1`), nil
				})
				switch {
				case errors.Is(err, ErrStale):
					mu.Lock()
					stale++
					mu.Unlock()
				case err != nil:
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
	}
	for key, n := range runs {
		if n != 1 {
			t.Errorf("%s: effect ran %d times", key, n)
		}
	}
	if len(runs) != 30 {
		t.Fatalf("%d keys applied, want 30", len(runs))
	}
	t.Logf("%d of 30 older attempts refused as stale (the others came first, or after the result)", stale)
}

// TestAFailedAttemptKeepsItsFence: the newer attempt fails, which frees the
// key; the older one, arriving late, is still refused (before fences, the
// claim was deleted and the late attempt ran the effect). The newer
// attempt's retry (the same fence) and later deliveries run as usual.
func TestAFailedAttemptKeepsItsFence(t *testing.T) {
	r, _ := newReceiver(t, Config{})
	const key = "trip:t2:3:1"
	var runs counter
	boom := errors.New("supplier down")
	if _, _, err := r.DoFenced(t.Context(), key, 5, nil, func(context.Context) (json.RawMessage, error) {
		runs.n.Add(1)
		return nil, boom
	}); err != boom {
		t.Fatalf("err = %v, want the effect's error unchanged", err)
	}
	if _, _, err := r.DoFenced(t.Context(), key, 4, nil, runs.effect(0)); !errors.Is(err, ErrStale) {
		t.Fatalf("older attempt after the newer failed: err = %v, want ErrStale", err)
	}
	if _, _, err := r.Do(t.Context(), key, nil, func(context.Context) (json.RawMessage, error) {
		return nil, boom // unfenced: never refused, and the fence is kept
	}); err != boom {
		t.Fatalf("unfenced attempt: %v", err)
	}
	if _, _, err := r.DoFenced(t.Context(), key, 4, nil, runs.effect(0)); !errors.Is(err, ErrStale) {
		t.Fatalf("older attempt after an unfenced failure: err = %v, want ErrStale", err)
	}
	res, replayed, err := r.DoFenced(t.Context(), key, 5, nil, runs.effect(0))
	if err != nil || replayed || string(res) != `{"run":2}` {
		t.Fatalf("the same fence again: %s replayed=%v err=%v, want the effect run", res, replayed, err)
	}
	if n := runs.n.Load(); n != 2 {
		t.Fatalf("effect ran %d times, want 2 (one failure, one success)", n)
	}
}

// TestAStaleClaimIsNotTakenOverByAnOlderFence: a claim left by a crashed
// owner is taken over after Lease only by an attempt at least as new.
func TestAStaleClaimIsNotTakenOverByAnOlderFence(t *testing.T) {
	r, kv := newReceiver(t, Config{Lease: 200 * time.Millisecond})
	const key = "k"
	if _, err := kv.Create(t.Context(), encodeKey(key), claim{digest: digestOf(nil), owner: "crashed-host:1/x", fence: 9}.value()); err != nil {
		t.Fatal(err)
	}
	var runs counter
	natstest.Eventually(t, 5*time.Second, func() bool {
		_, _, err := r.DoFenced(t.Context(), key, 8, nil, runs.effect(0))
		if !errors.Is(err, ErrStale) {
			t.Fatalf("fence 8 against a claim of fence 9: %v, want ErrStale", err)
		}
		e, err := kv.Get(t.Context(), encodeKey(key))
		return err == nil && time.Since(e.Created()) > 300*time.Millisecond // stale by now, still refused
	})
	res, _, err := r.DoFenced(t.Context(), key, 10, nil, runs.effect(0))
	if err != nil || string(res) != `{"run":1}` {
		t.Fatalf("fence 10 taking over: %s %v", res, err)
	}
	var rec record
	e, _ := kv.Get(t.Context(), encodeKey(key))
	_ = json.Unmarshal(e.Value(), &rec)
	if rec.State != stateDone || rec.Fence != 10 {
		t.Fatalf("record %+v, want done with fence 10", rec)
	}
}

func TestParseFence(t *testing.T) {
	for v, want := range map[string]uint64{"": 0, "0": 0, "42": 42, "18446744073709551615": 1<<64 - 1} {
		if got, err := ParseFence(v); err != nil || got != want {
			t.Errorf("ParseFence(%q) = %d, %v; want %d", v, got, err, want)
		}
	}
	for _, v := range []string{"-1", "x", "1.5", "18446744073709551616"} {
		if _, err := ParseFence(v); err == nil {
			t.Errorf("ParseFence(%q) accepted", v)
		}
	}
}

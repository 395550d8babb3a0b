package receiver

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// skewed gives r a clock off by d from the server's.
func skewed(r *Receiver, d time.Duration) *Receiver {
	c := *r
	c.now = func() time.Time { return time.Now().Add(d) }
	return &c
}

// TestAClockAheadDoesNotTakeOverARunningClaim: a receiver whose clock runs
// hours ahead of the server's must not take a claim whose owner keeps
// renewing it for stale: the effect runs once.
func TestAClockAheadDoesNotTakeOverARunningClaim(t *testing.T) {
	r, _ := newReceiver(t, Config{Lease: 300 * time.Millisecond})
	ahead := skewed(r, 2*time.Hour)
	var c counter
	first := make(chan error, 1)
	go func() {
		_, _, err := r.Do(t.Context(), "k", nil, c.effect(time.Second))
		first <- err
	}()
	for c.n.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, _, err := ahead.Do(ctx, "k", nil, func(context.Context) (json.RawMessage, error) {
		t.Error("a receiver with its clock 2h ahead took over a claim its owner renews")
		return nil, nil
	})
	if !errors.Is(err, ErrInProgress) {
		t.Fatalf("err = %v, want ErrInProgress (the owner still renews its claim)", err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// TestAClockBehindStillTakesOverACrashedClaim: a receiver whose clock runs
// hours behind takes over a claim nobody renews within about a lease, not
// hours later.
func TestAClockBehindStillTakesOverACrashedClaim(t *testing.T) {
	r, kv := newReceiver(t, Config{Lease: 300 * time.Millisecond})
	behind := skewed(r, -2*time.Hour)
	crashedClaim(t, kv, "k", nil)
	var c counter
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, replayed, err := behind.Do(ctx, "k", nil, c.effect(0))
	if err != nil || replayed || string(res) != `{"run":1}` {
		t.Fatalf("takeover with a clock 2h behind: %s, replayed %v, %v", res, replayed, err)
	}
}

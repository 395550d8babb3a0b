package aggregate

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/esjet/esjet/internal/natstest"
)

func transfer(from, to string, amt string, key string) []MultiRequest {
	return []MultiRequest{
		{Request: Request{Type: "account", ID: from, Kind: "withdraw", Payload: json.RawMessage(`{"amount":` + amt + `}`), IdempotencyKey: key}},
		{Request: Request{Type: "account", ID: to, Kind: "deposit", Payload: json.RawMessage(`{"amount":` + amt + `}`), IdempotencyKey: key}},
	}
}

func balance(t *testing.T, r *Repository, id string) int64 {
	t.Helper()
	st, err := r.Get(t.Context(), "account", id)
	if err != nil {
		t.Fatalf("state of %s: %v", id, err)
	}
	return st.Value.(account).Balance
}

func TestHandleAll(t *testing.T) {
	s := natstest.RunServer(t)
	t.Run("a transfer appends to both accounts or neither", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, s)
		r := f.repo(t, Config{})
		mustSend(t, r, "a", "deposit", `{"amount":10}`, "")
		mustSend(t, r, "b", "deposit", `{"amount":1}`, "")
		res, err := r.HandleAll(t.Context(), transfer("a", "b", "7", ""))
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 2 || res[0].Version != 2 || res[1].Version != 2 || res[1].Seq != res[0].Seq+1 {
			t.Fatalf("results %+v, want both at version 2, adjacent", res)
		}
		before := f.msgs(t)
		_, err = r.HandleAll(t.Context(), transfer("a", "b", "7", ""))
		var rej *Rejection
		if !errors.As(err, &rej) || rej.Code != "insufficient_funds" || !strings.Contains(err.Error(), "account/a") {
			t.Fatalf("overdraft: %v, want insufficient_funds naming account/a", err)
		}
		if f.msgs(t) != before {
			t.Error("a refused transfer appended something")
		}
		if a, b := balance(t, r, "a"), balance(t, r, "b"); a != 3 || b != 8 {
			t.Errorf("balances a %d b %d, want 3 and 8", a, b)
		}
	})
	t.Run("a stale expected version names the aggregate and writes nothing", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, s)
		r := f.repo(t, Config{})
		mustSend(t, r, "a", "deposit", `{"amount":10}`, "")
		mustSend(t, r, "b", "deposit", `{"amount":1}`, "")
		other := f.repo(t, Config{}) // another node moves b behind r's cache
		mustSend(t, other, "b", "deposit", `{"amount":1}`, "")
		before := f.msgs(t)
		cmds := transfer("a", "b", "5", "")
		one, one2 := uint64(1), uint64(1)
		cmds[0].ExpectedVersion, cmds[1].ExpectedVersion = &one, &one2
		_, err := r.HandleAll(t.Context(), cmds)
		var stale *StaleError
		if !errors.As(err, &stale) || stale.Type != "account" || stale.ID != "b" || stale.Expected != 1 || stale.Actual != 2 || !errors.Is(err, ErrConflict) {
			t.Fatalf("stale b: %v, want a StaleError for account/b at 2, expected 1", err)
		}
		if f.msgs(t) != before {
			t.Error("a stale transfer appended something")
		}
	})
	t.Run("concurrent transfers keep the total", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, s)
		r1, r2 := f.repo(t, Config{ConflictRetries: 50}), f.repo(t, Config{ConflictRetries: 50})
		for _, id := range []string{"x", "y", "z"} {
			mustSend(t, r1, id, "deposit", `{"amount":100}`, "")
		}
		pairs := [][2]string{{"x", "y"}, {"y", "z"}, {"z", "x"}, {"y", "x"}}
		var wg sync.WaitGroup
		for i := range 16 {
			r := []*Repository{r1, r2}[i%2]
			p := pairs[i%len(pairs)]
			wg.Go(func() {
				if _, err := r.HandleAll(t.Context(), transfer(p[0], p[1], "1", "")); err != nil {
					t.Errorf("transfer %v: %v", p, err)
				}
			})
		}
		wg.Wait()
		if sum := balance(t, r1, "x") + balance(t, r1, "y") + balance(t, r1, "z"); sum != 300 {
			t.Errorf("total %d after transfers, want 300", sum)
		}
	})
	t.Run("a retried keyed request returns the first results", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, s)
		r := f.repo(t, Config{})
		mustSend(t, r, "a", "deposit", `{"amount":10}`, "")
		first, err := r.HandleAll(t.Context(), transfer("a", "b", "4", "k1"))
		if err != nil {
			t.Fatal(err)
		}
		before := f.msgs(t)
		again, err := f.repo(t, Config{}).HandleAll(t.Context(), transfer("a", "b", "4", "k1"))
		if err != nil {
			t.Fatal(err)
		}
		if f.msgs(t) != before || !again[0].Replayed || again[0].Seq != first[0].Seq || again[1].Seq != first[1].Seq {
			t.Errorf("retry: %+v (%d new messages), want the first results replayed", again, f.msgs(t)-before)
		}
	})
	t.Run("one aggregate twice is refused", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, s)
		r := f.repo(t, Config{})
		_, err := r.HandleAll(t.Context(), transfer("a", "a", "1", ""))
		if !errors.Is(err, ErrBadCommand) || !strings.Contains(err.Error(), "account/a appears twice") {
			t.Errorf("same aggregate twice: %v", err)
		}
	})
}

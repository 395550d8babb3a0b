package projection

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/wire"
)

// TestAGenerationNoLongerServedExpiresAndTheServedOneStays: after a
// rebuild switches in, the generation it replaced is kept (for a switch
// back) for the configured age, then stops and its bucket is deleted; the
// served generation keeps every document, and the next rebuild takes the
// freed bucket.
func TestAGenerationNoLongerServedExpiresAndTheServedOneStays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const age = 2 * time.Second
	cfg := testConfig()
	cfg.UnservedMaxAge = age
	e.run(t, cfg, counter("c"))
	for range 3 {
		e.append(t, "order", "o1", "placed")
	}
	eventually(t, "the view counts 3", func() bool { return e.count(t, "c", "o1") == 3 })
	v := NewViews(e.js, e.ns, 0)
	if _, err := v.Rebuild(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	var switched time.Time
	eventually(t, "generation 2 serves, generation 1 is kept", func() bool {
		_, ctl, err := v.control(ctx, "c")
		switched = time.Now()
		return err == nil && ctl.Active == 2 && ctl.Previous == 1
	})
	gen1 := wire.KVStream(ViewBucket(e.ns, "c", 1))
	// What esjet streams and the console say of the two buckets.
	ret, err := v.Retention(ctx, age)
	if err != nil {
		t.Fatal(err)
	}
	if r := ret[wire.KVStream(ViewBucket(e.ns, "c", 2))]; r.Kept != "while it serves" || !strings.Contains(r.Why, "generation 2") {
		t.Errorf("the served bucket's retention: %+v", r)
	}
	if r := ret[gen1]; !strings.HasPrefix(r.Kept, "until ") || !strings.Contains(r.Kept, "2s unserved") || !strings.Contains(r.Why, "switch back") {
		t.Errorf("the previous bucket's retention: %+v", r)
	}
	eventually(t, "generation 1 expired and its bucket is gone", func() bool {
		_, ctl, err := v.control(ctx, "c")
		_, serr := e.js.Stream(ctx, gen1)
		return err == nil && ctl.Previous == 0 && len(ctl.Retired) == 0 && errors.Is(serr, jetstream.ErrStreamNotFound)
	})
	if kept := time.Since(switched); kept < age-500*time.Millisecond {
		t.Fatalf("generation 1 was gone %s after the switch, before its %s", kept, age)
	}
	if err := v.Switch(ctx, "c", 1); err == nil {
		t.Fatal("a switch back to the expired generation 1 succeeded")
	}
	if n := e.count(t, "c", "o1"); n != 3 {
		t.Fatalf("the served generation counts %d, want 3", n)
	}
	e.append(t, "order", "o1", "placed")
	eventually(t, "the served generation counts 4", func() bool { return e.count(t, "c", "o1") == 4 })
	gen, err := v.Rebuild(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the next rebuild serves", func() bool {
		_, ctl, err := v.control(ctx, "c")
		return err == nil && ctl.Active == gen && e.count(t, "c", "o1") == 4
	})
}

// expiring makes view "c" of e serve generation 3 and retires generations
// 1 and 2 long ago, each bucket holding a document.
func expiring(t *testing.T, js jetstream.JetStream, ns string) controlStore {
	t.Helper()
	ctx := t.Context()
	kv, err := ensureBucket(ctx, js, wire.ProjectionsBucket(ns), 1, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := controlStore{kv: kv}
	long := time.Now().UTC().Add(-time.Hour)
	for gen := 1; gen <= 3; gen++ {
		b, err := ensureBucket(ctx, js, ViewBucket(ns, "c", gen), 1, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Put(ctx, "o1", []byte("1")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.update(ctx, "c", func(c *Control) error {
		*c = Control{Active: 3, Latest: 3, Partitions: 1, SlotsFrom: 1, Previous: 2, PreviousSince: long,
			Retired: []Retired{{Generation: 1, Bucket: ViewBucket(ns, "c", 1), Since: long}}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestTwoNodesExpireAGenerationAndOnlyOneDeletesIt: two nodes sweep the
// same view at once; each retired bucket is deleted by one of them, once,
// and the served generation is untouched.
func TestTwoNodesExpireAGenerationAndOnlyOneDeletesIt(t *testing.T) {
	t.Parallel()
	_, js := natstest.Connect(t, natstest.RunServer(t))
	ns := natstest.Namespace(t)
	cs := expiring(t, js, ns)
	deletes := map[string]*atomic.Int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, node := range []string{"a", "b"} {
		x := newExpirer(js, ns, cs, Config{UnservedMaxAge: time.Minute, LeaseTTL: time.Second, NodeID: node}, slog.New(slog.DiscardHandler))
		x.deleteStream = func(ctx context.Context, name string) error {
			mu.Lock()
			if deletes[name] == nil {
				deletes[name] = &atomic.Int64{}
			}
			deletes[name].Add(1)
			mu.Unlock()
			time.Sleep(50 * time.Millisecond) // the other node sweeps meanwhile
			return js.DeleteStream(ctx, name)
		}
		wg.Go(func() {
			for range 5 {
				if err := x.sweepView(t.Context(), "c"); err != nil {
					t.Errorf("node %s: %v", node, err)
				}
			}
		})
	}
	wg.Wait()
	for gen := 1; gen <= 2; gen++ {
		s := wire.KVStream(ViewBucket(ns, "c", gen))
		var n int64
		if c := deletes[s]; c != nil {
			n = c.Load()
		}
		if n != 1 {
			t.Errorf("generation %d's bucket deleted %d times, want once", gen, n)
		}
		if _, err := js.Stream(t.Context(), s); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("generation %d's bucket: %v, want it gone", gen, err)
		}
	}
	ctl, _, err := cs.control(t.Context(), "c")
	if err != nil || ctl.Active != 3 || ctl.Previous != 0 || len(ctl.Retired) != 0 {
		t.Fatalf("control after the sweeps: %+v (%v); want generation 3 serving, nothing kept", ctl, err)
	}
	if n := deletes[wire.KVStream(ViewBucket(ns, "c", 3))]; n != nil {
		t.Fatal("the served generation's bucket was deleted")
	}
	kv, err := js.KeyValue(t.Context(), ViewBucket(ns, "c", 3))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(t.Context(), "o1"); err != nil {
		t.Fatalf("the served generation's document: %v", err)
	}
}

// TestANodeThatMayNotDeleteStreamsEmptiesExpiredGenerationsAndSaysSoOnce:
// a node whose NATS user may not delete streams (the node role) purges an
// expired generation's bucket instead, records it emptied, goes on, and
// logs why once however many it empties.
func TestANodeThatMayNotDeleteStreamsEmptiesExpiredGenerationsAndSaysSoOnce(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "node", Password: "pw", Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.DELETE.*"}},
			Subscribe: &server.SubjectPermission{Allow: []string{">"}},
		}}}
	})
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("node", "pw"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ns := natstest.Namespace(t)
	cs := expiring(t, js, ns)
	var logs strings.Builder
	var logMu sync.Mutex
	x := newExpirer(js, ns, cs, Config{UnservedMaxAge: time.Minute, LeaseTTL: time.Second, NodeID: "n"},
		slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil)))
	for range 3 {
		if err := x.sweepView(t.Context(), "c"); err != nil {
			t.Fatalf("sweep: %v", err)
		}
	}
	for gen := 1; gen <= 2; gen++ {
		st, err := js.Stream(t.Context(), wire.KVStream(ViewBucket(ns, "c", gen)))
		if err != nil {
			t.Fatalf("generation %d's bucket: %v, want it kept, empty", gen, err)
		}
		if n := st.CachedInfo().State.Msgs; n != 0 {
			t.Errorf("generation %d's bucket holds %d messages, want it emptied", gen, n)
		}
	}
	ctl, _, err := cs.control(t.Context(), "c")
	if err != nil || ctl.Previous != 0 || len(ctl.Retired) != 2 || ctl.Retired[0].Emptied.IsZero() || ctl.Retired[1].Emptied.IsZero() {
		t.Fatalf("control: %+v (%v); want both generations retired and emptied", ctl, err)
	}
	ret, err := NewViews(js, ns, 0).Retention(t.Context(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if r := ret[wire.KVStream(ViewBucket(ns, "c", 1))]; r.Kept != "emptied, until an admin deletes it" {
		t.Errorf("an emptied bucket's retention: %+v", r)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if n := strings.Count(logs.String(), "may not delete streams"); n != 1 {
		t.Fatalf("the log says %d times that the node may not delete, want once:\n%s", n, logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// TestASecondSwitchRetiresTheGenerationItDropsAndARebuildTakesItsBucket:
// the previous generation a switch drops is retired with the time it
// stopped serving (not the time it was dropped), kept for the age, and the
// rebuild that takes its bucket takes it off the list.
func TestASecondSwitchRetiresTheGenerationItDropsAndARebuildTakesItsBucket(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	cfg := testConfig()
	cfg.UnservedMaxAge = time.Hour
	e.run(t, cfg, counter("c"))
	e.append(t, "order", "o1", "placed")
	eventually(t, "the view counts 1", func() bool { return e.count(t, "c", "o1") == 1 })
	v := NewViews(e.js, e.ns, 0)
	rebuild := func(want int) Control {
		t.Helper()
		gen, err := v.Rebuild(ctx, "c")
		if err != nil {
			t.Fatal(err)
		}
		if gen != want {
			t.Fatalf("rebuild made generation %d, want %d", gen, want)
		}
		var ctl Control
		eventually(t, "the rebuild serves", func() bool {
			_, ctl, err = v.control(ctx, "c")
			return err == nil && ctl.Active == gen
		})
		return ctl
	}
	first := rebuild(2)
	if first.Previous != 1 || first.PreviousSince.IsZero() || len(first.Retired) != 0 {
		t.Fatalf("after the first switch: %+v; want generation 1 kept since the switch, nothing retired", first)
	}
	second := rebuild(3)
	if second.Previous != 2 || len(second.Retired) != 1 {
		t.Fatalf("after the second switch: %+v; want generation 2 kept, generation 1 retired", second)
	}
	if r := second.Retired[0]; r.Generation != 1 || r.Bucket != ViewBucket(e.ns, "c", 1) || !r.Since.Equal(first.PreviousSince) {
		t.Fatalf("retired %+v; want generation 1 in %s, unserved since %s", r, ViewBucket(e.ns, "c", 1), first.PreviousSince)
	}
	if _, err := e.js.Stream(ctx, wire.KVStream(ViewBucket(e.ns, "c", 1))); err != nil {
		t.Fatalf("generation 1's bucket before its age: %v", err)
	}
	third := rebuild(4) // takes slot 0, generation 1's bucket
	if third.Previous != 3 || len(third.Retired) != 1 || third.Retired[0].Generation != 2 {
		t.Fatalf("after the third switch: %+v; want generation 3 kept, only generation 2 retired", third)
	}
	if n := e.count(t, "c", "o1"); n != 1 {
		t.Fatalf("generation 4 counts %d, want 1", n)
	}
}

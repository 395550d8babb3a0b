package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/projection"
	"github.com/esjet/esjet/internal/wire"
)

// TestViewsSurviveKilledNodesExactly: two nodes share the trip views of
// one NATS server (traveler_spend has two partitions, which write the
// travelers' documents concurrently). While a rebuild catches up over the log, nodes are
// killed with SIGKILL at random points and restarted; the rebuilt view
// (a non-idempotent counter: requests per traveler), the live one, and a
// rebuild from scratch with no kill are exactly the same, and count every
// request once.
func TestViewsSurviveKilledNodesExactly(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	url := s.ClientURL()
	dirs := []string{t.TempDir(), t.TempDir()}
	nodes := []*node{startNodeEnv(t, dirs[0], noDemo, "--url", url), startNodeEnv(t, dirs[1], noDemo, "--url", url)}
	began := time.Now()
	t.Cleanup(func() {
		if t.Failed() {
			for i, n := range nodes {
				t.Logf("node %d's log:\n%s", i, n.stderr.String())
			}
		}
	})

	// Fill the log: 1,200 trips over 50 travelers, through both nodes.
	var travelers []string
	for i := range 50 {
		travelers = append(travelers, fmt.Sprint("t", i))
	}
	const trips = 1200
	var wg sync.WaitGroup
	var failures sync.Map
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < trips; i += 8 {
				body := fmt.Sprintf(`{"traveler":%q,"destination":"Oslo","budget":1000,"flight_price":400,"hotel_price":300}`, travelers[i%len(travelers)])
				code, out := post(t, "http://"+nodes[i%2].httpAddr+fmt.Sprintf("/v1/trip/p%d/request_trip", i), body, nil)
				if code != http.StatusOK {
					failures.Store(i, string(out))
				}
			}
		})
	}
	wg.Wait()
	failures.Range(func(k, v any) bool { t.Fatalf("trip p%v: %v", k, v); return false })

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	views := projection.NewViews(js, "demo", 0)
	rebuild := func() int {
		gen, err := views.Rebuild(t.Context(), "traveler_spend")
		if err != nil {
			t.Fatal(err)
		}
		return gen
	}
	waitActive := func(gen int) {
		t.Helper()
		// Two minutes: a rebuild of 1,200 trips after two kills (each
		// holding its partitions for a 5 s lease) under -race on a busy
		// machine took longer than one.
		natstest.Eventually(t, 2*time.Minute, func() bool {
			st, err := views.Status(t.Context(), "traveler_spend")
			return err == nil && st.Active == gen && st.Building == 0
		})
	}

	t.Logf("%d trips recorded in %s", trips, time.Since(began).Round(time.Millisecond))
	// Rebuild while nodes die at random points of the catch-up (an owner
	// killed holds its partitions until its lease runs out, 5 s).
	killed := rebuild()
	for k := range 2 {
		// Into the catch-up: once the new generation has begun, at a random
		// point after.
		natstest.Eventually(t, 30*time.Second, func() bool {
			st, err := views.Status(t.Context(), "traveler_spend")
			return err == nil && (st.Build == nil || st.Build.Position > 0)
		})
		time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond)
		i := rand.IntN(len(nodes))
		st, _ := views.Status(t.Context(), "traveler_spend")
		nodes[i].kill9(t)
		t.Logf("kill %d: node %d killed with SIGKILL; the rebuild stood at %+v", k+1, i, st.Build)
		nodes[i] = startNodeEnv(t, dirs[i], noDemo, "--url", url)
	}
	waitActive(killed)
	// Generation 1, the live one, stops when the next rebuild switches in
	// (the previous generation is then the killed rebuild): let it reach
	// the log's end first, as it would on a log that keeps growing.
	natstest.Eventually(t, 60*time.Second, func() bool {
		st, err := views.Status(t.Context(), "traveler_spend")
		if err != nil {
			return false
		}
		caught := 0
		for _, p := range st.Parts {
			if seq, _ := wire.SplitPosition(p.Position); p.Generation == 1 && seq >= st.LogEnd {
				caught++
			}
		}
		return caught == st.Partitions
	})
	// The reference: a rebuild from scratch with nothing killed.
	clean := rebuild()
	waitActive(clean)
	t.Logf("rebuilt twice in %s", time.Since(began).Round(time.Millisecond))

	want := viewDocs(t, js, projection.ViewBucket("demo", "traveler_spend", clean))
	var total int
	for _, who := range travelers {
		var s struct {
			Requested int `json:"requested"`
		}
		_ = json.Unmarshal([]byte(want[who]), &s)
		total += s.Requested
	}
	if total != trips {
		t.Fatalf("the clean rebuild counts %d requests, want %d: %v", total, trips, want)
	}
	for _, gen := range []int{1, killed} {
		got := viewDocs(t, js, projection.ViewBucket("demo", "traveler_spend", gen))
		for k, v := range want {
			if !strings.HasPrefix(k, "trip/") && got[k] != v {
				t.Errorf("generation %d: %s = %s, a rebuild from scratch says %s", gen, k, got[k], v)
			}
		}
		if len(got) != len(want) {
			t.Errorf("generation %d holds %d documents, a rebuild from scratch %d", gen, len(got), len(want))
		}
	}
	for _, n := range nodes {
		n.stop(t, syscall.SIGTERM)
	}
}

// viewDocs reads a view bucket's documents (esjet's own keys left out).
func viewDocs(t *testing.T, js jetstream.JetStream, bucket string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatalf("bucket %s: %v", bucket, err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k := range keys.Keys() {
		if strings.HasPrefix(k, "_esjet.") {
			continue
		}
		e, err := kv.Get(ctx, k)
		if err != nil {
			t.Fatalf("%s/%s: %v", bucket, k, err)
		}
		out[k] = string(e.Value())
	}
	return out
}

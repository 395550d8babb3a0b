package e2e

// Issue 28's independent run: "kills the node under load, rebuilds and
// switches views, and checks every read-after-P answer of every view
// document against its own fold of the log, and the same for position on
// every document read". The demo's node runs under steady trip traffic
// from a few travelers (traveler_spend's two partitions share their
// documents); every client reads its trip's traveler and trip documents
// after the position its request returned, and without one. Meanwhile the
// node is killed -9, during a rebuild of both views and right after a
// switch back, and restarted. Every answer is then held to a fold of the
// log read through GET /v1/log: a read after P answers with a position
// ≥ P, and a document holds every event up to its position (and nothing
// the log does not). At the end each view equals the fold.
//
// Run it three times: go test ./e2e -run TestReadAfterPositionHoldsThroughKillsRebuildsAndSwitches -count 3 -v

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/internal/natstest"
)

// viewAnswer is one 200 answer of a view read.
type viewAnswer struct {
	view, key string
	after     uint64 // 0: read without a position
	doc       struct {
		Value      json.RawMessage `json:"value"`
		Generation int             `json:"generation"`
		Position   uint64          `json:"position"`
	}
}

// raReads is what the clients read.
type raReads struct {
	mu      sync.Mutex
	answers []viewAnswer
	codes   map[int]int
}

func (r *raReads) read(client *http.Client, addr, view, key string, after uint64) {
	url := fmt.Sprintf("http://%s/v1/views/%s/%s", addr, view, key)
	if after > 0 {
		url += fmt.Sprintf("?after=%d&wait=5s", after)
	}
	resp, err := client.Get(url)
	if err != nil {
		return // the node is down
	}
	defer resp.Body.Close()
	a := viewAnswer{view: view, key: key, after: after}
	ok := resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&a.doc) == nil
	r.mu.Lock()
	defer r.mu.Unlock()
	r.codes[resp.StatusCode]++
	if ok {
		r.answers = append(r.answers, a)
	}
}

// raLoad runs clients that request trips and read after them until stop.
func raLoad(t *testing.T, addr func() string, travelers []string, reads *raReads, stop <-chan struct{}) (wait func() int) {
	t.Helper()
	var wg sync.WaitGroup
	var n, acked atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			client := &http.Client{Timeout: 8 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := n.Add(1)
				id, who := fmt.Sprintf("ra%d", i), travelers[int(i)%len(travelers)]
				body := fmt.Sprintf(`{"traveler":%q,"destination":"Oslo","budget":100000,"flight_price":%d,"hotel_price":30000}`, who, 30000+int(i%7)*1000)
				var pos uint64
				for pos == 0 {
					select {
					case <-stop:
						return
					default:
					}
					req := newPostRequest(t, "http://"+addr()+"/v1/trip/"+id+"/request_trip", body, map[string]string{"Idempotency-Key": id + "-" + strconv.Itoa(w)})
					resp, err := client.Do(req)
					if err != nil {
						time.Sleep(100 * time.Millisecond)
						continue
					}
					var res struct {
						Position uint64 `json:"position"`
					}
					if resp.StatusCode == http.StatusOK {
						_ = json.NewDecoder(resp.Body).Decode(&res)
						pos = res.Position
					} else {
						time.Sleep(100 * time.Millisecond)
					}
					resp.Body.Close()
				}
				acked.Add(1)
				a := addr()
				reads.read(client, a, trip.ViewTravelerSpend, who, pos)
				reads.read(client, a, trip.ViewTripsByStatus, "trip/"+id, pos)
				reads.read(client, a, trip.ViewTravelerSpend, who, 0)
				reads.read(client, a, trip.ViewTripsByStatus, "trip/"+id, 0)
			}
		})
	}
	return func() int { wg.Wait(); return int(acked.Load()) }
}

// raEvent is one event of GET /v1/log.
type raEvent struct {
	Position    uint64          `json:"position"`
	AggregateID string          `json:"aggregate_id"`
	Type        string          `json:"type"`
	Data        json.RawMessage `json:"data"`
}

// readLog reads every event through GET /v1/log.
func readLog(t *testing.T, addr string) []raEvent {
	t.Helper()
	var all []raEvent
	for after := uint64(0); ; {
		var page struct {
			Events []raEvent `json:"events"`
			Next   uint64    `json:"next"`
		}
		if code := getJSON(t, fmt.Sprintf("http://%s/v1/log?after=%d&limit=1000", addr, after), &page); code != http.StatusOK {
			t.Fatalf("GET /v1/log?after=%d: %d", after, code)
		}
		all = append(all, page.Events...)
		if len(page.Events) == 0 || page.Next <= after {
			return all
		}
		after = page.Next
	}
}

// spendAt folds the log's events up to position upTo into traveler
// documents, as traveler_spend's definition says (not its code).
func spendAt(log []raEvent, upTo uint64) map[string]trip.Spend {
	type tr struct {
		who    string
		amount int64
	}
	trips := map[string]tr{}
	out := map[string]trip.Spend{}
	for _, e := range log {
		if e.Position > upTo {
			break
		}
		if e.Type == trip.EventTripRequested {
			var r trip.RequestTrip
			_ = json.Unmarshal(e.Data, &r)
			trips[e.AggregateID] = tr{r.Traveler, r.FlightPrice + r.HotelPrice}
		}
		t, ok := trips[e.AggregateID]
		if !ok {
			continue
		}
		s := out[t.who]
		s.Traveler = t.who
		switch e.Type {
		case trip.EventTripRequested:
			s.Requested++
		case trip.EventTripConfirmed:
			s.Confirmed++
			s.Spent += t.amount
		case trip.EventTripCancelled, trip.EventTripRejected:
			s.Cancelled++
		default:
			continue
		}
		out[t.who] = s
	}
	return out
}

// statusEvents are each trip's status-changing events, in log order.
func statusEvents(log []raEvent) map[string][]raEvent {
	out := map[string][]raEvent{}
	for _, e := range log {
		switch e.Type {
		case trip.EventTripRequested, trip.EventBudgetLocked, trip.EventTripConfirmed, trip.EventTripCancelled, trip.EventTripRejected:
			out[e.AggregateID] = append(out[e.AggregateID], e)
		}
	}
	return out
}

// checkAnswer holds one answer to the fold: a problem, or "".
func checkAnswer(a viewAnswer, log []raEvent, byTrip map[string][]raEvent, final map[string]trip.Spend) string {
	q := a.doc.Position
	if a.after > 0 && q < a.after {
		return fmt.Sprintf("position %d below after=%d", q, a.after)
	}
	if q == 0 {
		return ""
	}
	if a.view == trip.ViewTravelerSpend {
		var got trip.Spend
		_ = json.Unmarshal(a.doc.Value, &got)
		lo, hi := spendAt(log, q)[a.key], final[a.key]
		if got.Requested < lo.Requested || got.Confirmed < lo.Confirmed || got.Cancelled < lo.Cancelled || got.Spent < lo.Spent ||
			got.Requested > hi.Requested || got.Confirmed > hi.Confirmed || got.Cancelled > hi.Cancelled || got.Spent > hi.Spent {
			return fmt.Sprintf("%+v at position %d (generation %d): the log up to it says %+v, all of it %+v", got, q, a.doc.Generation, lo, hi)
		}
		return ""
	}
	var got trip.TripSummary
	_ = json.Unmarshal(a.doc.Value, &got)
	// The document is the trip after one of its events: the last one up
	// to the position, or a later one.
	evs, last, at := byTrip[got.ID], -1, -1
	for i, e := range evs {
		if e.Position <= q {
			last = i
		}
		if e.Position == got.Position {
			at = i
		}
	}
	if "trip/"+got.ID != a.key || at < 0 || at < last {
		return fmt.Sprintf("%+v at position %d (generation %d): the trip's events %v, the last up to the position is #%d", got, q, a.doc.Generation, evs, last)
	}
	return ""
}

var rebuiltAs = regexp.MustCompile(`as generation (\d+)`)

func TestReadAfterPositionHoldsThroughKillsRebuildsAndSwitches(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := startNode(t, dir)
	var addr addrOf
	addr.follow(t, n)
	cli := func(args ...string) string { return runCLI(t, dir, append([]string{"--url", n.natsURL}, args...)...) }
	restart := func(why string) {
		n.kill9(t)
		n = startNode(t, dir)
		addr.follow(t, n)
		t.Logf("node killed -9 %s; restarted", why)
	}
	reads := &raReads{codes: map[int]int{}}
	stop := make(chan struct{})
	wait := raLoad(t, addr.get, []string{"ada", "bo", "cy", "di", "ed"}, reads, stop)
	answered := func(k int) {
		natstest.Eventually(t, 60*time.Second, func() bool {
			reads.mu.Lock()
			defer reads.mu.Unlock()
			return len(reads.answers) >= k
		})
	}

	answered(200)
	restart("under load")
	answered(400)
	gens := map[string]int{}
	for _, v := range []string{trip.ViewTravelerSpend, trip.ViewTripsByStatus} {
		m := rebuiltAs.FindStringSubmatch(cli("projections", "rebuild", v))
		if m == nil {
			t.Fatal("projections rebuild did not name the new generation")
		}
		gens[v], _ = strconv.Atoi(m[1])
	}
	restart("during the rebuilds")
	answered(600)
	// Both rebuilds switch in (the node finishes them after its restart).
	var status json.RawMessage
	deadline := time.Now().Add(3 * time.Minute)
	for done := 0; done < len(gens); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the rebuilt generations %v did not switch in within 3 minutes: %s\n%s", gens, status, n.stderr.String())
		}
		var sts []struct {
			Name   string `json:"name"`
			Active int    `json:"active"`
		}
		_ = getJSON(t, "http://"+addr.get()+"/v1/views", &status)
		_ = json.Unmarshal(status, &sts)
		done = 0
		for _, s := range sts {
			if g, ok := gens[s.Name]; ok && s.Active == g {
				done++
			}
		}
	}
	cli("projections", "switch", trip.ViewTravelerSpend, strconv.Itoa(gens[trip.ViewTravelerSpend]-1))
	restart("right after switching traveler_spend back")
	answered(800)
	close(stop)
	trips := wait()

	// Quiet: the views pass the log's end.
	log := readLog(t, addr.get())
	end := log[len(log)-1].Position
	final := spendAt(log, end)
	for who, want := range final {
		var doc struct {
			Value    trip.Spend `json:"value"`
			Position uint64     `json:"position"`
		}
		url := fmt.Sprintf("http://%s/v1/views/%s/%s?after=%d&wait=30s", addr.get(), trip.ViewTravelerSpend, who, end)
		if code := getJSON(t, url, &doc); code != http.StatusOK {
			why := "?"
			if resp, err := httpClient.Get(url); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				why = fmt.Sprintf("%d %s", resp.StatusCode, b)
			}
			t.Fatalf("final read of %s: %d (read again: %s)\n%s", who, code, why, n.stderr.String())
		}
		if doc.Value != want {
			t.Errorf("at the end %s is %+v, the fold of the log %+v", who, doc.Value, want)
		}
	}
	byTrip := statusEvents(log)
	reads.mu.Lock()
	defer reads.mu.Unlock()
	var violations []string
	after := 0
	for _, a := range reads.answers {
		if a.after > 0 {
			after++
		}
		if p := checkAnswer(a, log, byTrip, final); p != "" {
			violations = append(violations, fmt.Sprintf("%s/%s after=%d: %s", a.view, a.key, a.after, p))
		}
	}
	t.Logf("%d trips, %d events; %d view answers checked (%d after a position), other answers by code %v; %d violation(s)",
		trips, len(log), len(reads.answers), after, reads.codes, len(violations))
	for i, v := range violations {
		if i == 20 {
			break
		}
		t.Error(v)
	}
	// The last trips' sagas may still run, one of them waiting out the
	// claim the in-process demo target of a killed node left mid-call (the
	// receiver's lease, a minute): a graceful stop would wait for it past
	// its 15s grace and exit 1 (seen on two busy cores). The views are what
	// this test checks; graceful stops have tests of their own.
	n.kill9(t)
}

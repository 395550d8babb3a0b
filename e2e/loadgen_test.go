package e2e

// The fault suite's harness: an independent effect ledger, a node config
// that routes the trip's commands to it, a load generator that behaves as a
// real client (one Idempotency-Key per trip, retried on every error and
// timeout until acknowledged), and the invariant check every scenario ends
// with. The scenarios themselves are in faults_test.go.
//
// A scenario is: newEffectLedger, ledgerNodeConfig, start the node(s),
// ledger.attach(natsURL), startLoad, inject the fault, restart, then
// checkScenario, which waits for the system to drain, checks the
// invariants, prints one line
//
//	scenario=… commands=… acked=… lost=0 double_applied=0 orphans=0 drift=0 redeliveries=… dup_suppressed=… recovery_ms=…
//
// and fails the test on any violation.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/receiver"
)

var soak = flag.Bool("soak", false, "run the fault scenarios longer: 10× the trips and the pauses")

// soakScale multiplies a scenario's size and pauses under -soak.
func soakScale() int {
	if *soak {
		return 10
	}
	return 1
}

// ledgerSubjects maps each command kind the trip issues to the ledger's
// subject for it.
var ledgerSubjects = map[string]string{
	"lock_budget":    "ledger.budget.lock",
	"release_budget": "ledger.budget.release",
	"book_flight":    "ledger.flights.book",
	"cancel_flight":  "ledger.flights.cancel",
	"book_hotel":     "ledger.hotels.book",
	"cancel_hotel":   "ledger.hotels.cancel",
}

// Worker and relay timings of every fault scenario: short, so a crashed
// process's leases run out within seconds.
const (
	faultAckWait       = 2 * time.Second
	faultRelayAckWait  = 2 * time.Second
	faultDrainBound    = 60 * time.Second
	faultStall         = 15 * time.Second
	faultLoadDeadline  = 90 * time.Second
	faultAttemptTimout = 3 * time.Second
)

// effectLedger is the services' side, in the test process: it answers the
// ledger subjects as the demo services answer theirs, folds repeated
// deliveries with package receiver on a KV bucket of its own NATS server
// (which no fault touches), and counts per idempotency key how often the
// effect actually ran.
type effectLedger struct {
	t     *testing.T
	rcv   folder
	delay time.Duration // each effect takes this long (0: instant)
	// redeliveryDelay, if set, is how long the effect of an attempt after
	// the first (Esjet-Attempt > 1) takes instead: it keeps a redelivered
	// call in flight (fencing_test.go).
	redeliveryDelay time.Duration
	// delayOf, if set, says how long the effect of request m of kind
	// takes (it replaces delay).
	delayOf      func(kind string, m *nats.Msg) time.Duration
	lateInFlight atomic.Int64 // effects of attempts after the first, running now
	running      atomic.Int64 // effects running now

	mu         sync.Mutex
	deliveries map[string]int             // idempotency key → requests received
	applied    map[string]int             // idempotency key → effect runs
	kindOf     map[string]string          // idempotency key → kind
	logical    map[string]map[string]bool // kind|aggregate id → keys whose effect ran
	replayed   int                        // requests answered with a stored result
	stale      int                        // requests refused as stale (a lower fence)
	problems   []string                   // conflicts, bad requests
	conns      []*nats.Conn
	wg         sync.WaitGroup
}

func newEffectLedger(t *testing.T) *effectLedger {
	t.Helper()
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rcv, err := receiver.New(ctx, js, receiver.Config{Bucket: "ledger_receipts", Lease: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l := &effectLedger{t: t, rcv: rcv, deliveries: map[string]int{}, applied: map[string]int{},
		kindOf: map[string]string{}, logical: map[string]map[string]bool{}}
	t.Cleanup(func() {
		l.detach()
		l.wg.Wait()
	})
	return l
}

// attach subscribes the ledger on the NATS server at url (queue group
// "ledger"). A restarted node listens on a new port: attach to it and
// detach the old connection.
func (l *effectLedger) attach(url string) {
	l.t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.Name("ledger"))
	if err != nil {
		l.t.Fatalf("ledger: connect %s: %v", url, err)
	}
	for kind, subj := range ledgerSubjects {
		if _, err := nc.QueueSubscribe(subj, "ledger", func(m *nats.Msg) {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				l.handle(kind, m)
			}()
		}); err != nil {
			l.t.Fatalf("ledger: subscribe %s: %v", subj, err)
		}
	}
	if err := nc.Flush(); err != nil {
		l.t.Fatalf("ledger: flush: %v", err)
	}
	l.mu.Lock()
	l.conns = append(l.conns, nc)
	l.mu.Unlock()
}

// detach closes every connection of the ledger.
func (l *effectLedger) detach() {
	l.mu.Lock()
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for _, nc := range conns {
		nc.Close()
	}
}

// reattach moves the ledger to url: the node it served was restarted.
func (l *effectLedger) reattach(url string) {
	l.detach()
	l.attach(url)
}

// ledgerRef derives a booking reference from the idempotency key, so a
// reference in the trip names the one key whose effect made it.
func ledgerRef(prefix, key string) string {
	return prefix + "-" + strings.NewReplacer(":", "-").Replace(key)
}

func ledgerResult(kind, key string) any {
	switch kind {
	case "lock_budget":
		return map[string]string{"lock_id": ledgerRef("BL", key)}
	case "book_flight":
		return map[string]string{"booking_ref": ledgerRef("FL", key)}
	case "book_hotel":
		return map[string]string{"booking_ref": ledgerRef("HT", key)}
	case "release_budget":
		return map[string]bool{"released": true}
	case "send_itinerary":
		return map[string]string{"itinerary_ref": ledgerRef("IT", key)}
	default:
		return map[string]bool{"cancelled": true}
	}
}

// folder is what the ledger folds repeated deliveries with: package
// receiver, or another receiver a scenario brings.
type folder interface {
	DoFenced(ctx context.Context, key string, fence uint64, params []byte, effect func(context.Context) (json.RawMessage, error)) (json.RawMessage, bool, error)
}

type ledgerReply struct {
	Result       json.RawMessage `json:"result,omitempty"`
	Error        string          `json:"error,omitempty"`
	Retryable    bool            `json:"retryable,omitempty"`
	Stale        bool            `json:"stale,omitempty"`
	RetryAfterMS int64           `json:"retry_after_ms,omitempty"`
}

func (l *effectLedger) handle(kind string, m *nats.Msg) {
	key := m.Header.Get("Idempotency-Key")
	agg := m.Header.Get("Esjet-Aggregate-Id")
	respond := func(r ledgerReply) {
		if r.Error == "" && r.Result == nil {
			r.Result = json.RawMessage("null")
		}
		data, _ := json.Marshal(r)
		_ = m.Respond(data) // the node may be gone: its redelivery asks again
	}
	if key == "" {
		l.problem("%s request without Idempotency-Key", kind)
		respond(ledgerReply{Error: "missing Idempotency-Key"})
		return
	}
	l.mu.Lock()
	l.deliveries[key]++
	l.kindOf[key] = kind
	l.mu.Unlock()

	delay := l.delay
	if l.delayOf != nil {
		delay = l.delayOf(kind, m)
	}
	if l.redeliveryDelay > 0 && m.Header.Get("Esjet-Attempt") != "1" {
		delay = l.redeliveryDelay
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second+delay)
	defer cancel()
	fence, err := receiver.ParseFence(m.Header.Get(receiver.HeaderFence))
	if err != nil {
		l.problem("%s %s: %v", kind, key, err)
	}
	res, replayed, err := l.rcv.DoFenced(ctx, key, fence, m.Data, func(ctx context.Context) (json.RawMessage, error) {
		l.running.Add(1)
		defer l.running.Add(-1)
		if delay > 0 {
			if delay == l.redeliveryDelay {
				l.lateInFlight.Add(1)
				defer l.lateInFlight.Add(-1)
			}
			time.Sleep(delay)
		}
		l.mu.Lock()
		l.applied[key]++
		lk := kind + "|" + agg
		if l.logical[lk] == nil {
			l.logical[lk] = map[string]bool{}
		}
		l.logical[lk][key] = true
		l.mu.Unlock()
		return json.Marshal(ledgerResult(kind, key))
	})
	if errors.Is(err, receiver.ErrNotRecorded) && res != nil {
		err = nil // the effect happened: say so
	}
	switch {
	case err == nil:
		if replayed {
			l.mu.Lock()
			l.replayed++
			l.mu.Unlock()
		}
		respond(ledgerReply{Result: res})
	case errors.Is(err, receiver.ErrStale):
		l.mu.Lock()
		l.stale++
		l.mu.Unlock()
		respond(ledgerReply{Error: err.Error(), Stale: true})
	case errors.Is(err, receiver.ErrConflict), errors.Is(err, receiver.ErrInvalidKey):
		l.problem("%s %s: %v", kind, key, err)
		respond(ledgerReply{Error: err.Error()})
	default: // in progress elsewhere, or the receipts bucket did not answer
		respond(ledgerReply{Error: err.Error(), Retryable: true, RetryAfterMS: 200})
	}
}

func (l *effectLedger) problem(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.problems = append(l.problems, fmt.Sprintf(format, args...))
}

// ledgerStats is what the ledger saw.
type ledgerStats struct {
	keys          int      // distinct idempotency keys delivered
	applied       int      // effect runs
	doubleApplied int      // keys whose effect ran twice or more, plus (kind, trip) pairs applied under two or more keys
	doubles       []string // which, for the failure message
	redeliveries  int      // requests beyond the first of each key
	dupSuppressed int      // requests answered with the stored result (replayed)
	problems      []string
}

func (l *effectLedger) stats() ledgerStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := ledgerStats{keys: len(l.deliveries), dupSuppressed: l.replayed, problems: slices.Clone(l.problems)}
	for _, n := range l.deliveries {
		s.redeliveries += n - 1
	}
	for key, n := range l.applied {
		s.applied += n
		if n > 1 {
			s.doubleApplied++
			s.doubles = append(s.doubles, fmt.Sprintf("%s %s applied %d times", l.kindOf[key], key, n))
		}
	}
	for lk, keys := range l.logical {
		if len(keys) > 1 {
			s.doubleApplied++
			s.doubles = append(s.doubles, fmt.Sprintf("%s applied under %d keys %v", lk, len(keys), slices.Sorted(mapKeys(keys))))
		}
	}
	slices.Sort(s.doubles)
	return s
}

// appliedKeyFor returns the one key whose effect of kind ran for trip id.
func (l *effectLedger) appliedKeyFor(kind, id string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.logical[kind+"|"+id] {
		return k
	}
	return ""
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// loadGen sends request_trip for trips s-0 … s-(n-1) from a few
// goroutines, as a real client: each trip has its own Idempotency-Key,
// and every connection error, timeout, 409, 429 and 5xx is retried with
// the same key until the node answers 200 about that trip or the deadline
// passes. addr returns the HTTP address to use now (a restarted node has a
// new one; see addrOf).
type loadGen struct {
	addr   func() string
	n      int
	client *http.Client

	mu       sync.Mutex
	acked    map[string]bool // trip id → acknowledged (200)
	replayed int             // 200s that were replays of a stored decision
	rejected []string        // answers a client cannot retry (4xx)
	foreign  []string        // 200s that were not an answer to the request sent (another process at the address)
	attempts atomic.Int64
	retries  atomic.Int64
	started  atomic.Int64 // trips whose first attempt was sent
	done     chan struct{}
}

// tripID is the load generator's i-th trip.
func tripID(i int) string { return fmt.Sprintf("s-%d", i) }

// startLoad starts the load: n trips from workers goroutines, each pausing
// pace between trips.
func startLoad(t *testing.T, addr func() string, n, workers int, pace time.Duration) *loadGen {
	t.Helper()
	lg := &loadGen{addr: addr, n: n, acked: map[string]bool{}, done: make(chan struct{}),
		client: &http.Client{Timeout: faultAttemptTimout, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}}
	deadline := time.Now().Add(faultLoadDeadline * time.Duration(soakScale()))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				lg.started.Add(1)
				lg.send(tripID(i), deadline)
				time.Sleep(pace)
			}
		})
	}
	go func() {
		wg.Wait()
		lg.client.CloseIdleConnections()
		close(lg.done)
	}()
	t.Cleanup(func() { <-lg.done })
	return lg
}

func (lg *loadGen) send(id string, deadline time.Time) {
	key := id + "-req"
	for attempt := 0; time.Now().Before(deadline); attempt++ {
		if attempt > 0 {
			lg.retries.Add(1)
			time.Sleep(min(time.Duration(attempt)*50*time.Millisecond, 500*time.Millisecond))
		}
		lg.attempts.Add(1)
		target := lg.addr()
		req, err := http.NewRequest(http.MethodPost, "http://"+target+"/v1/trip/"+id+"/request_trip", strings.NewReader(tripRequest))
		if err != nil {
			panic(err)
		}
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := lg.client.Do(req)
		if err != nil {
			continue // the node is down, stopped or restarting
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch code := resp.StatusCode; {
		case code == http.StatusOK:
			var res struct {
				AggregateID string `json:"aggregate_id"`
				Replayed    bool   `json:"replayed"`
			}
			if err := json.Unmarshal(body, &res); err != nil || res.AggregateID != id {
				// Not the node's answer about this trip: keep trying, and
				// let checkScenario say what answered.
				lg.mu.Lock()
				lg.foreign = append(lg.foreign, fmt.Sprintf("%s: 200 from %s: %.200s", id, target, body))
				lg.mu.Unlock()
				continue
			}
			lg.mu.Lock()
			lg.acked[id] = true
			if res.Replayed {
				lg.replayed++
			}
			lg.mu.Unlock()
			return
		case code == http.StatusConflict, code == http.StatusTooManyRequests, code >= 500:
			continue
		default:
			lg.mu.Lock()
			lg.rejected = append(lg.rejected, fmt.Sprintf("%s: %d %s", id, code, strings.TrimSpace(string(body))))
			lg.mu.Unlock()
			return
		}
	}
}

// wait waits for every trip to be acknowledged or given up on.
func (lg *loadGen) wait(t *testing.T) {
	t.Helper()
	select {
	case <-lg.done:
	case <-time.After(faultLoadDeadline*time.Duration(soakScale()) + 30*time.Second):
		t.Fatal("the load generator did not finish")
	}
}

func (lg *loadGen) ackedCount() int {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return len(lg.acked)
}

func (lg *loadGen) ackedIDs() []string {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return slices.Sorted(mapKeys(lg.acked))
}

// waitAcked waits until at least k trips are acknowledged (to inject a
// fault mid-load).
func (lg *loadGen) waitAcked(t *testing.T, k int) {
	t.Helper()
	natstest.Eventually(t, 60*time.Second, func() bool { return lg.ackedCount() >= k })
}

// faultReconcile is the part of `esjet reconcile --json` the suite reads.
type faultReconcile struct {
	Drift  uint64 `json:"drift"`
	Totals struct {
		Issued        uint64 `json:"issued"`
		InFlight      uint64 `json:"in_flight"`
		Completed     uint64 `json:"completed"`
		Failed        uint64 `json:"failed"`
		Dead          uint64 `json:"dead"`
		NotYetRelayed uint64 `json:"not_yet_relayed"`
		Orphans       uint64 `json:"orphans"`
		Duplicates    uint64 `json:"duplicates"`
		Stuck         uint64 `json:"stuck"`
	} `json:"totals"`
	raw string
}

// reconcileReport runs `esjet reconcile --json` against url; a non-zero
// exit with a report (drift) is not an error here.
func reconcileReport(t *testing.T, url string) faultReconcile {
	t.Helper()
	var rep faultReconcile
	rep.raw, _, _ = runReconcile(t, url, &rep)
	return rep
}

// scenario is what checkScenario needs to know about a run.
type scenario struct {
	name      string
	load      *loadGen
	ledger    *effectLedger
	httpAddr  func() string // a live node's HTTP address
	natsURL   string        // for reconcile
	recovered time.Time     // the restart (or resume): recovery_ms counts from here
	// allowDuplicates: OUTBOX may hold second copies (the dedup window
	// passed); drift is reported, and only lost, double_applied and
	// orphans are asserted.
	allowDuplicates bool
}

// checkScenario waits for the load to finish and the system to drain,
// checks the invariants, prints the scenario's line and fails the test on
// any violation.
func checkScenario(t *testing.T, sc scenario) {
	t.Helper()
	sc.load.wait(t)
	acked := sc.load.ackedIDs()
	base := func() string { return "http://" + sc.httpAddr() + "/v1/trip/" }

	// Drain: every acknowledged trip confirmed, nothing in flight, nothing
	// waiting for the relay.
	confirmed := map[string]bool{}
	var rep faultReconcile
	drained := false
	var recovery time.Duration
	deadline := time.Now().Add(faultDrainBound * time.Duration(soakScale()))
	// Stalled: reconcile says every command is settled, yet trips stay
	// unconfirmed and none moved for faultStall: an outcome was dropped,
	// nothing will retry it; stop waiting.
	lastProgress, lastConfirmed, lastReconcile := time.Now(), -1, time.Time{}
	for time.Now().Before(deadline) {
		for _, id := range acked {
			if confirmed[id] {
				continue
			}
			var st struct {
				State tripState `json:"state"`
			}
			if code := getJSON(t, base()+id, &st); code == http.StatusOK && st.State.Status == "confirmed" {
				confirmed[id] = true
			}
		}
		if len(confirmed) != lastConfirmed {
			lastProgress, lastConfirmed = time.Now(), len(confirmed)
		}
		if len(confirmed) == len(acked) {
			rep = reconcileReport(t, sc.natsURL)
			if rep.Totals.InFlight == 0 && rep.Totals.NotYetRelayed == 0 {
				drained = true
				recovery = time.Since(sc.recovered)
				break
			}
		} else if time.Since(lastProgress) > faultStall && time.Since(lastReconcile) > 2*time.Second {
			lastReconcile = time.Now()
			if r := reconcileReport(t, sc.natsURL); r.Totals.InFlight == 0 && r.Totals.NotYetRelayed == 0 {
				t.Logf("stalled: no trip confirmed for %v and reconcile has nothing in flight", faultStall)
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !drained {
		rep = reconcileReport(t, sc.natsURL)
		recovery = time.Since(sc.recovered)
	}

	// Lost: an acknowledged trip whose trip_requested is not in the log
	// exactly once. Also: no event recorded twice, and the references the
	// trip recorded are the ledger's.
	lost := 0
	var problems []string
	for _, id := range acked {
		var h struct {
			Events []tripEvent `json:"events"`
		}
		if code := getJSON(t, base()+id+"/events", &h); code != http.StatusOK {
			lost++
			problems = append(problems, fmt.Sprintf("trip %s: GET events answered %d", id, code))
			continue
		}
		if n := countType(h.Events, "trip_requested"); n != 1 {
			lost++
			problems = append(problems, fmt.Sprintf("trip %s: %d trip_requested events: %v", id, n, eventTypes(h.Events)))
		}
		for i, e := range h.Events {
			if e.Version != uint64(i+1) {
				problems = append(problems, fmt.Sprintf("trip %s: event %d has version %d", id, i, e.Version))
				break
			}
		}
		for _, typ := range []string{"budget_locked", "flight_booked", "hotel_booked", "trip_confirmed"} {
			if n := countType(h.Events, typ); n > 1 {
				problems = append(problems, fmt.Sprintf("trip %s: %d %s events: %v", id, n, typ, eventTypes(h.Events)))
			}
		}
		for _, leg := range []struct{ typ, kind, prefix string }{{"flight_booked", "book_flight", "FL"}, {"hotel_booked", "book_hotel", "HT"}} {
			for _, e := range h.Events {
				if e.Type != leg.typ {
					continue
				}
				var b struct {
					BookingRef string `json:"booking_ref"`
				}
				_ = json.Unmarshal(e.Data, &b)
				if key := sc.ledger.appliedKeyFor(leg.kind, id); b.BookingRef != ledgerRef(leg.prefix, key) {
					problems = append(problems, fmt.Sprintf("trip %s: %s ref %q, the ledger applied key %q", id, leg.typ, b.BookingRef, key))
				}
			}
		}
	}

	// An effect still running at the ledger may yet apply a key twice:
	// count it before judging.
	natstest.Eventually(t, 30*time.Second, func() bool { return sc.ledger.running.Load() == 0 })
	ls := sc.ledger.stats()
	sc.load.mu.Lock()
	rejected := slices.Clone(sc.load.rejected)
	foreign := slices.Clone(sc.load.foreign)
	sc.load.mu.Unlock()
	line := fmt.Sprintf("scenario=%s commands=%d acked=%d lost=%d double_applied=%d orphans=%d drift=%d redeliveries=%d dup_suppressed=%d recovery_ms=%d",
		sc.name, sc.load.n, len(acked), lost, ls.doubleApplied, rep.Totals.Orphans, rep.Drift, ls.redeliveries, ls.dupSuppressed, recovery.Milliseconds())
	t.Log(line)
	fmt.Println(line)
	t.Logf("%s: %d HTTP attempts (%d retries, %d replayed answers); ledger: %d keys, %d effects; reconcile: issued %d, completed %d, dead %d, duplicates %d, stuck %d",
		sc.name, sc.load.attempts.Load(), sc.load.retries.Load(), sc.load.replayed, ls.keys, ls.applied,
		rep.Totals.Issued, rep.Totals.Completed, rep.Totals.Dead, rep.Totals.Duplicates, rep.Totals.Stuck)

	if lost > 0 {
		t.Errorf("%d acknowledged trip(s) lost", lost)
	}
	if len(problems) > 0 {
		t.Errorf("the log is inconsistent:\n  %s", strings.Join(problems, "\n  "))
	}
	if ls.doubleApplied > 0 {
		t.Errorf("%d effect(s) applied twice at the ledger:\n  %s", ls.doubleApplied, strings.Join(ls.doubles, "\n  "))
	}
	if len(ls.problems) > 0 {
		t.Errorf("the ledger refused requests:\n  %s", strings.Join(ls.problems, "\n  "))
	}
	if len(rejected) > 0 {
		t.Errorf("%d request(s) rejected (a client cannot retry them):\n  %s", len(rejected), strings.Join(rejected, "\n  "))
	}
	if len(foreign) > 0 {
		t.Errorf("%d answer(s) came from something other than the node (another process at its address?):\n  %s", len(foreign), strings.Join(foreign, "\n  "))
	}
	if len(acked) != sc.load.n {
		t.Errorf("%d of %d trips acknowledged before the load deadline", len(acked), sc.load.n)
	}
	if rep.Totals.Orphans > 0 {
		t.Errorf("reconcile: %d orphan(s)\n%s", rep.Totals.Orphans, rep.raw)
	}
	if rep.Drift > 0 && !sc.allowDuplicates {
		t.Errorf("reconcile: drift %d\n%s", rep.Drift, rep.raw)
	}
	if sc.allowDuplicates && rep.Totals.Stuck > 0 {
		t.Errorf("reconcile: %d stuck\n%s", rep.Totals.Stuck, rep.raw)
	}
	if !drained {
		for _, id := range acked {
			if confirmed[id] {
				continue
			}
			var h struct {
				Events []tripEvent `json:"events"`
			}
			getJSON(t, base()+id+"/events", &h)
			t.Logf("not confirmed: trip %s: events %v", id, eventTypes(h.Events))
		}
		t.Errorf("not drained within %s: %d of %d acknowledged trips confirmed; reconcile in_flight %d, not_yet_relayed %d, dead %d\n%s",
			faultDrainBound*time.Duration(soakScale()), len(confirmed), len(acked), rep.Totals.InFlight, rep.Totals.NotYetRelayed, rep.Totals.Dead, rep.raw)
	}
}

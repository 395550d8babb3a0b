package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
)

// The saga tests drive the demo trip through the built binary only: HTTP
// for the trip, `esjet outbox|dlq|reconcile` for the workers' records, and
// the demo services' own log for the effects they performed.

// sagaTimeout bounds how long a trip may take to settle: generous, since
// every process is built with -race and the tests run in parallel.
const sagaTimeout = 30 * time.Second

// tripLeg and tripState are the trip's state as GET /v1/trip/<id> returns it.
type tripLeg struct {
	Status     string `json:"status"`
	BookingRef string `json:"booking_ref"`
	Error      string `json:"error"`
}

type tripState struct {
	Status       string  `json:"status"`
	Reason       string  `json:"reason"`
	BudgetStatus string  `json:"budget_status"`
	Flight       tripLeg `json:"flight"`
	Hotel        tripLeg `json:"hotel"`
}

type tripEvent struct {
	Type    string          `json:"type"`
	Version uint64          `json:"version"`
	Data    json.RawMessage `json:"data"`
}

// getJSON GETs url and decodes a 200 answer into v; it returns the status.
func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: decode: %v", url, err)
	}
	return resp.StatusCode
}

// sendTrip POSTs request_trip for id to n with body, as curl would.
func sendTrip(t *testing.T, n *node, id, body string) {
	t.Helper()
	code, out := post(t, "http://"+n.httpAddr+"/v1/trip/"+id+"/request_trip", body, map[string]string{"Idempotency-Key": id + "-req"})
	if code != http.StatusOK {
		t.Fatalf("request_trip %s: %d %s", id, code, out)
	}
}

// waitTrip polls the trip's state on n until done accepts it, failing with
// the last state seen after timeout.
func waitTrip(t *testing.T, n *node, id string, timeout time.Duration, what string, done func(tripState) bool) tripState {
	t.Helper()
	var last tripState
	deadline := time.Now().Add(timeout)
	for {
		var st struct {
			State tripState `json:"state"`
		}
		if code := getJSON(t, "http://"+n.httpAddr+"/v1/trip/"+id, &st); code == http.StatusOK {
			last = st.State
			if done(last) {
				return last
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("trip %s not %s within %s; last state %+v", id, what, timeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tripEvents returns the trip's events and fails unless their versions are
// contiguous from 1.
func tripEvents(t *testing.T, n *node, id string) []tripEvent {
	t.Helper()
	var h struct {
		Version uint64      `json:"version"`
		Events  []tripEvent `json:"events"`
	}
	if code := getJSON(t, "http://"+n.httpAddr+"/v1/trip/"+id+"/events", &h); code != http.StatusOK {
		t.Fatalf("GET events of trip %s: %d", id, code)
	}
	for i, e := range h.Events {
		if e.Version != uint64(i+1) {
			t.Fatalf("event %d (%s) has version %d: versions not contiguous: %v", i, e.Type, e.Version, eventTypes(h.Events))
		}
	}
	if len(h.Events) == 0 || h.Version != uint64(len(h.Events)) {
		t.Fatalf("history version %d with %d events", h.Version, len(h.Events))
	}
	return h.Events
}

func eventTypes(evs []tripEvent) []string {
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	return types
}

func countType(evs []tripEvent, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// requireOnce fails unless each type occurs exactly once in evs.
func requireOnce(t *testing.T, evs []tripEvent, types ...string) {
	t.Helper()
	for _, typ := range types {
		if n := countType(evs, typ); n != 1 {
			t.Errorf("%d %s event(s), want exactly 1; events %v", n, typ, eventTypes(evs))
		}
	}
}

// reconcileCounts is the part of `esjet reconcile --json` the tests read.
type reconcileCounts struct {
	Issued    uint64 `json:"issued"`
	InFlight  uint64 `json:"in_flight"`
	Completed uint64 `json:"completed"`
	Failed    uint64 `json:"failed"`
	Dead      uint64 `json:"dead"`
	Orphans   uint64 `json:"orphans"`
}

// reconcileNoDrift runs `esjet reconcile` against url (namespace demo) and
// requires exit 0 and drift 0; it returns the totals and per-kind counts.
func reconcileNoDrift(t *testing.T, url string) (reconcileCounts, map[string]reconcileCounts) {
	t.Helper()
	var rep struct {
		Drift  uint64                     `json:"drift"`
		Totals reconcileCounts            `json:"totals"`
		Kinds  map[string]reconcileCounts `json:"kinds"`
	}
	stdout, stderr, code := runReconcile(t, url, &rep)
	if code != 0 || rep.Drift != 0 {
		t.Fatalf("reconcile: exit %d, drift %d\n%s\n%s", code, rep.Drift, stdout, stderr)
	}
	return rep.Totals, rep.Kinds
}

// runReconcile runs `esjet reconcile --json` against url and decodes its
// report into v. A run that produced no report at all (the streams could
// not be read: a cluster settling after a fault) is tried again for up to
// 20s; the report itself, drift or not, is the caller's to judge.
func runReconcile(t *testing.T, url string, v any) (stdout, stderr string, code int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		stdout, stderr, code = runCLIFail(t, t.TempDir(), "reconcile", "--json", "--no-progress", "--url", url)
		err := json.Unmarshal([]byte(stdout), v)
		if err == nil {
			return stdout, stderr, code
		}
		if time.Now().After(deadline) {
			t.Fatalf("reconcile gave no report for 20s (exit %d, %v)\n%s\n%s", code, err, stdout, stderr)
		}
		t.Logf("reconcile could not report yet (exit %d): %s", code, strings.TrimSpace(stderr))
		time.Sleep(250 * time.Millisecond)
	}
}

// settledReconcile polls reconcile until nothing is in flight (outcomes
// are reported before the ack, so a settled trip may still have acks on
// their way), then returns its counts.
func settledReconcile(t *testing.T, url string) (reconcileCounts, map[string]reconcileCounts) {
	t.Helper()
	deadline := time.Now().Add(sagaTimeout)
	for {
		tot, kinds := reconcileNoDrift(t, url)
		if tot.InFlight == 0 {
			return tot, kinds
		}
		if time.Now().After(deadline) {
			t.Fatalf("reconcile: %d command(s) still in flight after %s: %+v", tot.InFlight, sagaTimeout, kinds)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// commandInfo is the part of `esjet outbox <command-id> --json` the tests read.
type commandInfo struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Receipt *struct {
		Outcome   string `json:"outcome"`
		Attempts  int    `json:"attempts"`
		LastError string `json:"last_error"`
	} `json:"receipt"`
	Outbox []json.RawMessage `json:"outbox"`
}

func outboxCommand(t *testing.T, url, id string) commandInfo {
	t.Helper()
	out := runCLI(t, t.TempDir(), "outbox", id, "--json", "--url", url)
	var info commandInfo
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("esjet outbox %s: %v\n%s", id, err, out)
	}
	return info
}

// inFlight is `esjet outbox --json`'s in-flight count of kind.
func inFlight(t *testing.T, url, kind string) uint64 {
	t.Helper()
	out := runCLI(t, t.TempDir(), "outbox", "--json", "--url", url)
	var rep struct {
		Kinds []struct {
			Kind     string `json:"kind"`
			InFlight uint64 `json:"in_flight"`
		} `json:"kinds"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("esjet outbox --json: %v\n%s", err, out)
	}
	for _, k := range rep.Kinds {
		if k.Kind == kind {
			return k.InFlight
		}
	}
	return 0
}

// demoWorkersConfig writes a config file routing every trip kind to the
// demo services' subjects over NATS (for a node run with
// ESJET_DEMO_SERVICES=false); extra is YAML appended under book_hotel.
func demoWorkersConfig(t *testing.T, hotelExtra string) string {
	t.Helper()
	subjects := map[string]string{
		"lock_budget":    "demo.svc.budget.lock",
		"release_budget": "demo.svc.budget.release",
		"book_flight":    "demo.svc.flights.book",
		"cancel_flight":  "demo.svc.flights.cancel",
		"book_hotel":     "demo.svc.hotels.book",
		"cancel_hotel":   "demo.svc.hotels.cancel",
	}
	var b strings.Builder
	b.WriteString("workers:\n")
	kinds := make([]string, 0, len(subjects))
	for k := range subjects {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		fmt.Fprintf(&b, "  %s:\n    target: nats\n    subject: %s\n", k, subjects[k])
		if k == "book_hotel" && hotelExtra != "" {
			for line := range strings.SplitSeq(strings.TrimSpace(hotelExtra), "\n") {
				b.WriteString("    " + strings.TrimSpace(line) + "\n")
			}
		}
	}
	path := filepath.Join(t.TempDir(), "esjet.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// demoServices is a running `esjet demo-services` child process; it logs
// at debug level in JSON so the test can count the effects it performed.
type demoServices struct {
	cmd    *exec.Cmd
	stderr *natstest.Buffer
	done   chan error
}

func startDemoServices(t *testing.T, url string, args ...string) *demoServices {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"demo-services", "--url", url}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = cleanEnv("ESJET_LOG_LEVEL=debug", "ESJET_LOG_FORMAT=json")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &demoServices{cmd: cmd, stderr: &natstest.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.Contains(sc.Text(), "demo services ready") {
				close(ready)
				signalled = true
			}
		}
	}()
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		// It may have exited on its own (its NATS went away): then these
		// fail harmlessly, and done holds Wait's result.
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-s.done
	})
	select {
	case <-ready:
		return s
	case err := <-s.done:
		s.done <- err
		t.Fatalf("demo-services exited before ready (%v):\n%s", err, s.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("demo-services not ready within 60s:\n%s", s.stderr.String())
	}
	return nil
}

// handled is one "handled" debug line of the demo services' log.
type handled struct {
	Subject   string `json:"subject"`
	CommandID string `json:"command_id"`
	Attempt   string `json:"attempt"`
	Replayed  bool   `json:"replayed"`
	Error     any    `json:"error"`
}

// requests lists the requests the demo services answered on subject.
func (s *demoServices) requests(t *testing.T, subject string) []handled {
	t.Helper()
	var hs []handled
	for line := range strings.Lines(s.stderr.String()) {
		var rec struct {
			Msg string `json:"msg"`
			handled
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "handled" || rec.Subject != subject {
			continue
		}
		hs = append(hs, rec.handled)
	}
	return hs
}

// effects counts the requests on subject that performed the effect: not a
// replay of a stored result, and no error.
func effects(hs []handled) int {
	n := 0
	for _, h := range hs {
		if !h.Replayed && (h.Error == nil || h.Error == "") {
			n++
		}
	}
	return n
}

func TestSagaRunsToConfirmation(t *testing.T) {
	t.Parallel()
	start := time.Now()
	n := startNode(t, t.TempDir())
	sendTrip(t, n, "lisbon", tripRequest)
	st := waitTrip(t, n, "lisbon", sagaTimeout, "confirmed", func(s tripState) bool { return s.Status == "confirmed" })
	if st.BudgetStatus != "locked" || st.Flight.Status != "booked" || st.Hotel.Status != "booked" ||
		!strings.HasPrefix(st.Flight.BookingRef, "FL-") || !strings.HasPrefix(st.Hotel.BookingRef, "HT-") {
		t.Errorf("confirmed trip's state: %+v", st)
	}
	evs := tripEvents(t, n, "lisbon")
	requireOnce(t, evs, "trip_requested", "budget_locked", "flight_booked", "hotel_booked", "trip_confirmed")
	if last := evs[len(evs)-1].Type; last != "trip_confirmed" {
		t.Errorf("last event %s, want trip_confirmed: %v", last, eventTypes(evs))
	}
	for _, bad := range []string{"flight_failed", "hotel_failed", "trip_cancelled", "trip_rejected"} {
		if countType(evs, bad) > 0 {
			t.Errorf("a %s event in a trip that should succeed: %v", bad, eventTypes(evs))
		}
	}
	tot, kinds := settledReconcile(t, n.natsURL)
	if tot.Issued != 3 || tot.Completed != tot.Issued || tot.Dead != 0 || tot.Failed != 0 {
		t.Errorf("reconcile totals %+v, want 3 issued, 3 completed", tot)
	}
	for _, k := range []string{"lock_budget", "book_flight", "book_hotel"} {
		if c := kinds[k]; c.Issued != 1 || c.Completed != 1 {
			t.Errorf("reconcile %s: %+v, want 1 issued, 1 completed", k, c)
		}
	}
	t.Logf("trip confirmed, events %v, in %v", eventTypes(evs), time.Since(start).Round(time.Millisecond))
	n.stop(t, syscall.SIGTERM)
}

func TestSagaCompensatesATerminalFailure(t *testing.T) {
	t.Parallel()
	n := startNode(t, t.TempDir())
	body := strings.Replace(tripRequest, "Lisbon", "Atlantis", 1)
	sendTrip(t, n, "atl", body)
	// The hotel always books (mode ok): on a cancelled trip its booking is
	// compensated too, before or after the flight fails.
	st := waitTrip(t, n, "atl", sagaTimeout, "cancelled and compensated", func(s tripState) bool {
		return s.Status == "cancelled" && s.BudgetStatus == "released" && s.Hotel.Status == "cancelled"
	})
	if st.Flight.Status != "failed" || !strings.Contains(st.Flight.Error, "no seats") || !strings.Contains(st.Reason, "no seats") {
		t.Errorf("cancelled trip's state: %+v", st)
	}
	evs := tripEvents(t, n, "atl")
	requireOnce(t, evs, "trip_requested", "budget_locked", "flight_failed", "trip_cancelled", "budget_released")
	if countType(evs, "hotel_booked") > 0 {
		requireOnce(t, evs, "hotel_booked", "hotel_cancelled")
	}
	for _, bad := range []string{"flight_booked", "trip_confirmed", "compensation_failed"} {
		if countType(evs, bad) > 0 {
			t.Errorf("a %s event in a trip that should be compensated: %v", bad, eventTypes(evs))
		}
	}

	// The worker writes the letter last, just after it reported the
	// failure the trip compensated for: it is there or a moment away.
	var dead []struct {
		ID       string `json:"command_id"`
		Kind     string `json:"kind"`
		Error    string `json:"error"`
		Attempts int    `json:"attempts"`
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		out := runCLI(t, t.TempDir(), "dlq", "ls", "--json", "--url", n.natsURL)
		if err := json.Unmarshal([]byte(out), &dead); err != nil {
			t.Fatalf("dlq ls --json: %v\n%s", err, out)
		}
		return len(dead) > 0
	})
	// The worker prefixes the service's error with its class ("terminal:
	// no seats"); the service's words must be there.
	if len(dead) != 1 || dead[0].Kind != "book_flight" || dead[0].ID != "trip:atl:2:0" || !strings.HasSuffix(dead[0].Error, "no seats") || dead[0].Attempts != 1 {
		t.Errorf("dead letters %+v, want exactly book_flight trip:atl:2:0 with error \"no seats\" after 1 attempt", dead)
	}

	tot, kinds := settledReconcile(t, n.natsURL)
	// lock_budget, book_flight, book_hotel, then release_budget, cancel_hotel.
	if tot.Issued != 5 || tot.Dead != 1 || tot.Completed != 4 {
		t.Errorf("reconcile totals %+v, want 5 issued, 4 completed, 1 dead", tot)
	}
	if c := kinds["book_flight"]; c.Dead != 1 || c.Completed != 0 {
		t.Errorf("reconcile book_flight: %+v, want dead", c)
	}
	t.Logf("compensated: %v", eventTypes(evs))
	n.stop(t, syscall.SIGTERM)
}

func TestTransientSupplierFailureIsRetriedToOneEffect(t *testing.T) {
	t.Parallel()
	cfg := demoWorkersConfig(t, "")
	n := startNodeEnv(t, t.TempDir(), []string{"ESJET_DEMO_SERVICES=false"}, "--config", cfg)
	svc := startDemoServices(t, n.natsURL, "--fail", "hotels=transient:2")
	sendTrip(t, n, "busy", tripRequest)
	waitTrip(t, n, "busy", sagaTimeout, "confirmed", func(s tripState) bool { return s.Status == "confirmed" })

	info := outboxCommand(t, n.natsURL, "trip:busy:2:1")
	if info.Kind != "book_hotel" || info.Receipt == nil || info.Receipt.Outcome != "done" || info.Receipt.Attempts != 3 || len(info.Outbox) != 1 {
		t.Errorf("book_hotel command: %+v receipt %+v, want one OUTBOX copy, receipt done after 3 attempts", info, info.Receipt)
	}
	evs := tripEvents(t, n, "busy")
	requireOnce(t, evs, "hotel_booked", "flight_booked", "trip_confirmed")
	if countType(evs, "hotel_failed") > 0 {
		t.Errorf("a transient failure reached the trip: %v", eventTypes(evs))
	}
	hs := svc.requests(t, "demo.svc.hotels.book")
	if len(hs) != 3 || effects(hs) != 1 {
		t.Errorf("hotel bookings: %d request(s), %d effect(s), want 3 requests, 1 effect: %+v", len(hs), effects(hs), hs)
	}
	settledReconcile(t, n.natsURL)
	n.stop(t, syscall.SIGTERM)
}

// TestWorkerStoppedPastItsLeaseDoesNotApplyTwice: node A takes the hotel
// booking and is SIGSTOPped in the middle of it, past its 1s lease; node B
// gets the redelivery and calls the hotel service with the same
// Idempotency-Key; A is resumed afterwards and its late reply and ack
// arrive. The service booked once, the trip recorded one booking.
func TestWorkerStoppedPastItsLeaseDoesNotApplyTwice(t *testing.T) {
	t.Parallel()
	srv := natstest.RunServer(t)
	url := srv.ClientURL()
	cfg := demoWorkersConfig(t, "ack_wait: 1s\ntimeout: 20s\nmax_attempts: 20")
	env := []string{"ESJET_DEMO_SERVICES=false"}
	svc := startDemoServices(t, url, "--slow", "hotels=8s:1") // the first hotel booking takes 8s: room to stop A on 2 busy cores

	a := startNodeEnv(t, t.TempDir(), env, "--url", url, "--config", cfg)
	t.Cleanup(func() { _ = a.cmd.Process.Signal(syscall.SIGCONT) }) // runs before startNode's kill
	sendTrip(t, a, "late", tripRequest)
	waitTrip(t, a, "late", sagaTimeout, "with the flight booked", func(s tripState) bool { return s.Flight.Status == "booked" })
	natstest.Eventually(t, sagaTimeout, func() bool { return inFlight(t, url, "book_hotel") >= 1 })

	// A holds the hotel booking, which the service answers after 8s: stop A
	// now, so that the answer arrives while it is stopped and its lease runs
	// out.
	if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if rc := outboxCommand(t, url, "trip:late:2:1").Receipt; rc != nil {
		t.Fatalf("the hotel booking finished before node A was stopped (receipt %+v): the test proves nothing", rc)
	}
	b := startNodeEnv(t, t.TempDir(), env, "--url", url, "--config", cfg)
	st := waitTrip(t, b, "late", sagaTimeout, "confirmed by node B", func(s tripState) bool { return s.Status == "confirmed" })
	if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("node A stopped for %v; node B confirmed the trip", time.Since(stopped).Round(time.Millisecond))

	// A wakes with the service's late reply: its receipt, outcome report
	// and ack must not book again nor record a second booking. Wait until A
	// has answered a request again, i.e. it is running.
	natstest.Eventually(t, sagaTimeout, func() bool {
		var v struct{}
		return getJSON(t, "http://"+a.httpAddr+"/v1/trip/late", &v) == http.StatusOK
	})
	tot, _ := settledReconcile(t, url)
	if tot.Issued != 3 || tot.Completed != 3 {
		t.Errorf("reconcile totals %+v, want 3 issued, 3 completed", tot)
	}
	info := outboxCommand(t, url, "trip:late:2:1")
	if info.Receipt == nil || info.Receipt.Outcome != "done" || info.Receipt.Attempts < 2 {
		t.Errorf("book_hotel receipt %+v, want done after 2 or more deliveries", info.Receipt)
	}
	evs := tripEvents(t, b, "late")
	requireOnce(t, evs, "hotel_booked", "flight_booked", "trip_confirmed")
	var booked struct {
		BookingRef string `json:"booking_ref"`
	}
	for _, e := range evs {
		if e.Type == "hotel_booked" {
			_ = json.Unmarshal(e.Data, &booked)
		}
	}
	if booked.BookingRef == "" || booked.BookingRef != st.Hotel.BookingRef {
		t.Errorf("hotel_booked ref %q, state's %q", booked.BookingRef, st.Hotel.BookingRef)
	}
	hs := svc.requests(t, "demo.svc.hotels.book")
	if len(hs) < 2 || effects(hs) != 1 {
		t.Errorf("hotel service: %d request(s), %d effect(s); want 2 or more requests (A's and B's), 1 effect: %+v", len(hs), effects(hs), hs)
	}
	t.Logf("hotel service answered %d request(s) with %d effect; receipt after %d deliveries", len(hs), effects(hs), info.Receipt.Attempts)
	for line := range strings.Lines(a.stderr.String()) {
		if strings.Contains(line, "command_id=trip:late:2:1") {
			t.Logf("node A after SIGCONT: %s", strings.TrimSpace(line))
		}
	}
	b.stop(t, syscall.SIGTERM)
	a.stop(t, syscall.SIGTERM)
}

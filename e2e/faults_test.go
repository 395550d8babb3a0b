package e2e

// The fault suite: "nothing lost, nothing done twice, whatever crashes
// where". Each scenario runs its own node(s) on its own data dir with the
// trip's commands routed to an independent ledger (loadgen_test.go), sends
// trips as a retrying client would, injects one fault, restarts what died,
// waits for the system to drain and checks the invariants. Each prints
//
//	scenario=… commands=… acked=… lost=0 double_applied=0 orphans=0 drift=0 redeliveries=… dup_suppressed=… recovery_ms=…
//
// Run with -soak for 10× the trips and pauses:
//
//	go test -race -run 'Fault' -v ./e2e/ -soak 2>&1 | grep scenario=

import (
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/failpoint"
	"github.com/esjet/esjet/internal/natstest"
)

// faultTrips is each scenario's number of trips (three worker commands
// each: lock_budget, book_flight, book_hotel).
func faultTrips() int { return 40 * soakScale() }

const (
	faultClients = 4                     // load generator goroutines
	faultPace    = 25 * time.Millisecond // each client's pause between trips
)

// faultEnv is every fault node's environment: no in-process demo services,
// the ledger answers the trip's commands.
var faultEnv = []string{"ESJET_DEMO_SERVICES=false"}

// TestFaultFailpoints kills the node at each failpoint in turn mid-load
// (the Kth time the point is reached), restarts it on the same data dir
// without the failpoint, and checks the invariants.
func TestFaultFailpoints(t *testing.T) {
	t.Parallel()
	const k = 5
	for _, point := range failpoint.Known {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := ledgerNodeConfig(t, "")
			ledger := newEffectLedger(t)

			n := startNodeEnv(t, dir, append(faultEnv, fmt.Sprintf("%s=%s=kill@%d", failpoint.EnvVar, point, k)), "--config", cfg)
			ledger.attach(n.natsURL)
			var addr addrOf
			addr.follow(t, n)
			load := startLoad(t, addr.get, faultTrips(), faultClients, faultPace)
			n.crashed(t)
			ackedAtCrash := load.ackedCount()
			first := n
			t.Cleanup(func() {
				if t.Failed() {
					logLines(t, "crashed node", first.stderr.String(), "WARN", "ERROR")
				}
			})

			restarted := time.Now()
			n = startNodeEnv(t, dir, faultEnv, "--config", cfg)
			addr.follow(t, n)
			ledger.reattach(n.natsURL)
			t.Logf("%s=kill@%d: the node died with %d trip(s) acknowledged; restarted in %v",
				point, k, ackedAtCrash, time.Since(restarted).Round(time.Millisecond))

			checkScenario(t, scenario{name: "failpoint-" + point, load: load, ledger: ledger,
				httpAddr: addr.get, natsURL: n.natsURL, recovered: restarted})
			n.stop(t, syscall.SIGTERM)
		})
	}
}

// TestFaultWorkerStoppedPastItsLease: two nodes share one NATS server;
// one is SIGSTOPped mid-load for three times the workers' ack_wait (and
// past the relay's failover_after), so the other redelivers its leases and
// takes over its relay; then it is resumed with its stale calls, reports
// and acks. The client retries on either node.
func TestFaultWorkerStoppedPastItsLease(t *testing.T) {
	t.Parallel()
	srv := natstest.RunServer(t, natstest.SyncAlways())
	url := srv.ClientURL()
	cfg := ledgerNodeConfig(t, "")
	ledger := newEffectLedger(t)
	ledger.delay = 20 * time.Millisecond // keep calls in flight when the node stops
	ledger.attach(url)

	a := startNodeEnv(t, t.TempDir(), faultEnv, "--url", url, "--config", cfg)
	t.Cleanup(func() { _ = a.cmd.Process.Signal(syscall.SIGCONT) }) // runs before startNode's kill
	b := startNodeEnv(t, t.TempDir(), faultEnv, "--url", url, "--config", cfg)
	t.Cleanup(func() {
		if t.Failed() {
			logLines(t, "node A", a.stderr.String(), "refused", "WARN", "ERROR")
			logLines(t, "node B", b.stderr.String(), "refused", "WARN", "ERROR")
		}
	})
	var rr atomic.Int64
	addr := func() string { // a load balancer: every attempt to the next node
		if rr.Add(1)%2 == 0 {
			return a.httpAddr
		}
		return b.httpAddr
	}
	load := startLoad(t, addr, faultTrips(), faultClients, faultPace)
	load.waitAcked(t, faultTrips()/4)

	if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pause := 3 * faultAckWait * time.Duration(soakScale())
	time.Sleep(pause)
	if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	t.Logf("node A stopped for %v mid-load; %d trip(s) acknowledged meanwhile", pause, load.ackedCount())

	checkScenario(t, scenario{name: "sigstop-worker-past-lease", load: load, ledger: ledger,
		httpAddr: func() string { return b.httpAddr }, natsURL: url, recovered: resumed})
	b.stop(t, syscall.SIGTERM)
	a.stop(t, syscall.SIGTERM)
}

// TestFaultKill9WholeNode kills the whole node (its embedded NATS server
// with it) with SIGKILL mid-load and restarts it on the same data dir.
func TestFaultKill9WholeNode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := ledgerNodeConfig(t, "")
	ledger := newEffectLedger(t)
	n := startNodeEnv(t, dir, faultEnv, "--config", cfg)
	ledger.attach(n.natsURL)
	var addr addrOf
	addr.follow(t, n)
	load := startLoad(t, addr.get, faultTrips(), faultClients, faultPace)
	load.waitAcked(t, faultTrips()/3)
	n.kill9(t)
	ackedAtKill := load.ackedCount()

	restarted := time.Now()
	n = startNodeEnv(t, dir, faultEnv, "--config", cfg)
	addr.follow(t, n)
	ledger.reattach(n.natsURL)
	t.Logf("kill -9 with %d trip(s) acknowledged", ackedAtKill)

	checkScenario(t, scenario{name: "kill9-whole-node", load: load, ledger: ledger,
		httpAddr: addr.get, natsURL: n.natsURL, recovered: restarted})
	n.stop(t, syscall.SIGTERM)
}

// TestFaultRestartAfterOutboxDedupWindow: the relay dies after OUTBOX took
// a batch's commands and before it acked their decisions; the node stays
// down longer than OUTBOX's duplicate window, so OUTBOX no longer drops a
// re-published copy. The restarted relay looks the redelivered decisions'
// commands up in OUTBOX and stores no second copy: nothing applied twice,
// no orphans, drift=0.
func TestFaultRestartAfterOutboxDedupWindow(t *testing.T) {
	t.Parallel()
	const window = 4 * time.Second
	dir := t.TempDir()
	cfg := ledgerNodeConfig(t, fmt.Sprintf("streams:\n  outbox_duplicate_window: %s\n", window))
	ledger := newEffectLedger(t)
	n := startNodeEnv(t, dir, append(faultEnv, failpoint.EnvVar+"="+failpoint.RelayAfterPublish+"=kill@3"), "--config", cfg)
	ledger.attach(n.natsURL)
	var addr addrOf
	addr.follow(t, n)
	load := startLoad(t, addr.get, faultTrips(), faultClients, faultPace)
	n.crashed(t)
	down := time.Now()
	time.Sleep(window + time.Second)

	restarted := time.Now()
	n = startNodeEnv(t, dir, faultEnv, "--config", cfg)
	addr.follow(t, n)
	ledger.reattach(n.natsURL)
	t.Logf("relay-after-publish=kill@3; down for %v (OUTBOX dedup window %v)", restarted.Sub(down).Round(time.Millisecond), window)

	checkScenario(t, scenario{name: "restart-after-outbox-dedup-window", load: load, ledger: ledger,
		httpAddr: addr.get, natsURL: n.natsURL, recovered: restarted})
	n.stop(t, syscall.SIGTERM)
}

// logLines logs the lines of a node's log that contain any of words.
func logLines(t *testing.T, who, log string, words ...string) {
	for line := range strings.Lines(log) {
		for _, w := range words {
			if strings.Contains(line, w) {
				t.Logf("%s: %s", who, strings.TrimSpace(line))
				break
			}
		}
	}
}

// TestFaultOutcomeReportedOnAnotherNode is the deterministic reduction of
// what the SIGSTOP scenario runs into, no fault needed: two nodes share a
// namespace; node A has the booking workers, node B the budget worker. A
// takes the trip request (and caches the trip at version 1); B's worker
// locks the budget and B records budget_locked (version 2) and issues the
// bookings; A's workers book, and A decides book_*_done on its cached
// version 1 without reading the tail: the trip rejects the outcome as
// unexpected_outcome (422), the worker takes the 4xx for a final refusal
// and acks. The bookings happened at the ledger, the trip never learns
// them, and nothing will retry: reconcile reports everything completed.
func TestFaultOutcomeReportedOnAnotherNode(t *testing.T) {
	t.Parallel()
	srv := natstest.RunServer(t, natstest.SyncAlways())
	url := srv.ClientURL()
	ledger := newEffectLedger(t)
	ledger.attach(url)
	a := startNodeEnv(t, t.TempDir(), faultEnv, "--url", url, "--config",
		ledgerNodeConfigKinds(t, []string{"book_flight", "book_hotel", "cancel_flight", "cancel_hotel"}, ""))
	b := startNodeEnv(t, t.TempDir(), faultEnv, "--url", url, "--config",
		ledgerNodeConfigKinds(t, []string{"lock_budget", "release_budget"}, ""))
	t.Cleanup(func() {
		if t.Failed() {
			logLines(t, "node A", a.stderr.String(), "refused")
		}
	})
	sendTrip(t, a, "x1", tripRequest)
	// Poll B: a read on A would refresh A's cached trip and hide the bug.
	waitTrip(t, b, "x1", 20*time.Second, "confirmed", func(s tripState) bool { return s.Status == "confirmed" })
	b.stop(t, syscall.SIGTERM)
	a.stop(t, syscall.SIGTERM)
}

// TestFaultRelayDiesHoldingDecisions: the node's relay is killed
// (relay-before-publish=kill@3) holding a batch of decisions it fetched
// and did not publish; the NATS server survives (external mode), so the
// consumer keeps them pending until ack_wait. The restarted relay gets the
// pin after failover_after and relays the newer decisions; with AckAll,
// its ack of a newer decision acks the pending ones too, and they are
// never redelivered: their commands never reach OUTBOX (reconcile:
// orphans), their trips stay at trip_requested.
func TestFaultRelayDiesHoldingDecisions(t *testing.T) {
	t.Parallel()
	srv := natstest.RunServer(t, natstest.SyncAlways())
	url := srv.ClientURL()
	cfg := ledgerNodeConfig(t, "")
	ledger := newEffectLedger(t)
	ledger.attach(url)
	dir := t.TempDir()
	n := startNodeEnv(t, dir, append(faultEnv, failpoint.EnvVar+"="+failpoint.RelayBeforePublish+"=kill@3"), "--url", url, "--config", cfg)
	var addr addrOf
	addr.follow(t, n)
	load := startLoad(t, addr.get, faultTrips(), faultClients, faultPace)
	n.crashed(t)
	restarted := time.Now()
	n = startNodeEnv(t, dir, faultEnv, "--url", url, "--config", cfg)
	addr.follow(t, n)

	checkScenario(t, scenario{name: "relay-killed-server-survives", load: load, ledger: ledger,
		httpAddr: addr.get, natsURL: url, recovered: restarted})
	n.stop(t, syscall.SIGTERM)
}

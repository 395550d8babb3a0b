package e2e

import (
	"syscall"
	"testing"
	"time"
)

// TestFleetNodeJoinsAndOneLeavesUnderLoad pins issue 16's fleet case: on an
// R3 cluster, nodes a and b take trips; node c joins while the load runs
// and takes its share; then a is killed -9 and b leaves (SIGTERM) while the
// load goes on, so whichever held the relay, it ends on c. Every
// acknowledged trip is in the log once, every recorded command in OUTBOX
// once, and reconcile reports no drift.
func TestFleetNodeJoinsAndOneLeavesUnderLoad(t *testing.T) {
	t.Parallel()
	servers := clStartCluster(t, t.TempDir())
	urls := clURLs(servers)
	env := append([]string{"ESJET_STREAMS_REPLICAS=3", "ESJET_OUTBOX_ACK_WAIT=2s", "ESJET_OUTBOX_FAILOVER_AFTER=2s"}, noDemo...)
	a := startNodeEnv(t, t.TempDir(), env, "--url", urls)
	b := startNodeEnv(t, t.TempDir(), env, "--url", urls)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node a's log:\n%s\nnode b's log:\n%s", a.stderr.String(), b.stderr.String())
		}
	})

	first := clStartLoad(t, "ja", 4, a, b)
	first.waitAcked(t, 20, 30*time.Second)
	c := startNodeEnv(t, t.TempDir(), env, "--url", urls) // joins under load
	joined := clStartLoad(t, "jc", 2, c, b)
	joined.waitAcked(t, 10, 30*time.Second)

	n := first.ackedCount()
	a.kill9(t) // leaves, with the relay
	leftAt := time.Now()
	recovery := first.waitRecovery(t, leftAt, 30*time.Second)
	first.waitAcked(t, n+20, 60*time.Second)
	first.stop()
	n = joined.ackedCount()
	b.stop(t, syscall.SIGTERM) // leaves: c is the last node
	joined.waitAcked(t, n+20, 60*time.Second)
	joined.stop()

	all := map[string]bool{}
	for _, l := range []*clLoad{first, joined} {
		for id := range l.acked {
			all[id] = true
		}
	}
	lost, double, orphans, recorded := clInvariants(t, c, urls, all)
	t.Logf("fleet: %d acknowledged trips, %d commands recorded, each in OUTBOX once; the load recovered %s after node a was killed; b left, c relayed the rest",
		len(all), recorded, recovery.Round(time.Millisecond))
	first.mu.Lock()
	first.sent = append(first.sent, joined.sent...)
	for id := range joined.acked {
		first.acked[id] = true
	}
	first.mu.Unlock()
	clScenarioLine(t, "fleet-join-leave", first, lost, double, orphans, recovery)
	if lost != 0 || double != 0 || orphans != 0 {
		t.Fatalf("lost=%d double=%d orphans=%d", lost, double, orphans)
	}
	c.stop(t, syscall.SIGTERM)
}

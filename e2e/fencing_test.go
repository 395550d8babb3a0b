package e2e

// Issue 11 item 7: a paused worker calls after its lease is gone. An
// independent run once saw a command applied twice, 30 µs apart, at a
// receiver that skipped only the keys it had finished: a SIGSTOPped node
// resumed and its stale worker called while the worker that had replaced
// it was still calling. Here the node stops itself exactly between its
// lease check and its call (failpoint worker-before-call=stop), the other
// node's redelivered call is kept in flight at the ledger, and the stopped
// node is resumed into it. The ledger's receiver folds only finished keys,
// and refuses an attempt whose Esjet-Fence is lower than one it has seen:
// that is what keeps the effect single.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/failpoint"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/receiver"
)

// finishedOnly is the receiver of that report: it skips a key once an
// effect for it has finished, but lets a second attempt run while the
// first is in flight. Unless unfenced, it also remembers the highest fence
// seen per key and refuses a lower one (receiver.ErrStale).
type finishedOnly struct {
	unfenced bool

	mu       sync.Mutex
	finished map[string]json.RawMessage
	highest  map[string]uint64
}

func (r *finishedOnly) DoFenced(ctx context.Context, key string, fence uint64, _ []byte, effect func(context.Context) (json.RawMessage, error)) (json.RawMessage, bool, error) {
	r.mu.Lock()
	if res, ok := r.finished[key]; ok {
		r.mu.Unlock()
		return res, true, nil
	}
	if !r.unfenced && fence < r.highest[key] {
		seen := r.highest[key]
		r.mu.Unlock()
		return nil, false, fmt.Errorf("%w: key %s: fence %d, %d seen", receiver.ErrStale, key, fence, seen)
	}
	r.highest[key] = max(r.highest[key], fence)
	r.mu.Unlock()
	res, err := effect(ctx)
	if err == nil {
		r.mu.Lock()
		r.finished[key] = res
		r.mu.Unlock()
	}
	return res, false, err
}

// fencingNodeConfig is ledgerNodeConfig with a worker timeout longer than
// the ledger's redelivery delay, so the replacing call is not cut short.
func fencingNodeConfig(t *testing.T) string {
	t.Helper()
	return writeLedgerConfig(t, slices.Sorted(mapKeys(ledgerSubjects)), func(string) ledgerKind { return ledgerKind{timeout: "20s"} }, "")
}

// stopped reports whether process pid is stopped (state T in /proc).
func stopped(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, ok := strings.Cut(string(data), ") ")
	return ok && strings.HasPrefix(rest, "T")
}

// TestFaultStaleWorkerFencedAtAFinishedOnlyReceiver: two nodes on one NATS
// server; node A stops itself between its lease check and its 5th call;
// node B gets A's commands once their leases run out and calls the ledger,
// whose effect for a redelivered attempt takes 3×ack_wait; A is resumed
// while B's calls are in flight. Applied once.
func TestFaultStaleWorkerFencedAtAFinishedOnlyReceiver(t *testing.T) {
	t.Parallel()
	srv := natstest.RunServer(t, natstest.SyncAlways())
	url := srv.ClientURL()
	cfg := fencingNodeConfig(t)
	ledger := newEffectLedger(t)
	ledger.rcv = &finishedOnly{finished: map[string]json.RawMessage{}, highest: map[string]uint64{}}
	ledger.redeliveryDelay = 3 * faultAckWait
	ledger.attach(url)

	a := startNodeEnv(t, t.TempDir(), append(faultEnv, failpoint.EnvVar+"="+failpoint.WorkerBeforeCall+"=stop@5"), "--url", url, "--config", cfg)
	t.Cleanup(func() { _ = a.cmd.Process.Signal(syscall.SIGCONT) }) // runs before startNode's kill
	b := startNodeEnv(t, t.TempDir(), faultEnv, "--url", url, "--config", cfg)
	t.Cleanup(func() {
		if t.Failed() {
			logLines(t, "node A", a.stderr.String(), "lease", "WARN", "ERROR")
			logLines(t, "node B", b.stderr.String(), "lease", "WARN", "ERROR")
		}
	})
	load := startLoad(t, func() string { return b.httpAddr }, faultTrips(), faultClients, faultPace)

	natstest.Eventually(t, 60*time.Second, func() bool { return stopped(a.cmd.Process.Pid) })
	stoppedAt := time.Now()
	// B has taken over A's commands and its calls are in flight.
	natstest.Eventually(t, 30*time.Second, func() bool { return ledger.lateInFlight.Load() > 0 })
	if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	t.Logf("node A stopped itself before a call; resumed after %v with %d redelivered call(s) in flight at the ledger",
		resumed.Sub(stoppedAt).Round(time.Millisecond), ledger.lateInFlight.Load())

	checkScenario(t, scenario{name: "sigstop-before-call-fenced", load: load, ledger: ledger,
		httpAddr: func() string { return b.httpAddr }, natsURL: url, recovered: resumed})
	ledger.mu.Lock()
	t.Logf("the ledger refused %d stale attempt(s)", ledger.stale)
	ledger.mu.Unlock()
	b.stop(t, syscall.SIGTERM)
	a.stop(t, syscall.SIGTERM)
}

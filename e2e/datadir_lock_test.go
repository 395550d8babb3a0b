package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
)

// TestFaultSecondNodeOnOneDataDir: node A runs under load; node B is started
// on A's data dir with other ports (the obvious move after "address in
// use"). B must refuse at once, naming A, without touching the store; A
// keeps serving. Then A is killed with SIGKILL: the lock file it leaves
// behind must not block, and B starts on the dir and finishes the work.
// Before the data dir was locked both nodes printed ready and acknowledged
// writes on one store, and some were gone after a restart.
func TestFaultSecondNodeOnOneDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := ledgerNodeConfig(t, "")
	ledger := newEffectLedger(t)
	a := startNodeEnv(t, dir, faultEnv, "--config", cfg)
	ledger.attach(a.natsURL)
	var addr addrOf
	addr.follow(t, a)
	load := startLoad(t, addr.get, faultTrips(), faultClients, faultPace)
	load.waitAcked(t, faultTrips()/4)

	dataDir := filepath.Join(dir, "data")
	code, stderr := runBounded(t, dir, faultEnv, "run", "--data-dir", dataDir,
		"--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--config", cfg)
	pid := strconv.Itoa(a.cmd.Process.Pid)
	if code == 0 || !strings.Contains(stderr, "pid "+pid) || !strings.Contains(stderr, a.natsListen) || !strings.Contains(stderr, "in use") {
		t.Fatalf("node B on node A's data dir: exit %d, want non-zero naming A (pid %s, %s):\n%s", code, pid, a.natsListen, stderr)
	}
	if strings.Contains(stderr, "ready:") || strings.Contains(stderr, "component=nats-server") {
		t.Errorf("node B started a server before refusing:\n%s", stderr)
	}
	if lock, err := os.ReadFile(filepath.Join(dataDir, "esjet.lock")); err != nil || !strings.Contains(string(lock), `"pid":`+pid) {
		t.Errorf("lock file after B's refusal = %q, %v; want still A's (pid %s)", lock, err, pid)
	}

	// A keeps serving: the load goes on past B's attempt.
	load.waitAcked(t, faultTrips()/2)
	a.kill9(t)
	ackedAtKill := load.ackedCount()

	restarted := time.Now()
	b := startNodeEnv(t, dir, faultEnv, "--config", cfg)
	addr.follow(t, b)
	ledger.reattach(b.natsURL)
	t.Logf("node B refused while A ran; A killed with %d trip(s) acknowledged; B started on its data dir in %v",
		ackedAtKill, time.Since(restarted).Round(time.Millisecond))
	if strings.Contains(b.stderr.String(), "in use") {
		t.Errorf("node B after A's death still saw the dir in use:\n%s", b.stderr.String())
	}

	checkScenario(t, scenario{name: "second-node-on-one-data-dir", load: load, ledger: ledger,
		httpAddr: addr.get, natsURL: b.natsURL, recovered: restarted})
	b.stop(t, syscall.SIGTERM)
}

// runBounded runs the binary to completion, killing it after a minute (a
// node that should have refused to start but is running), and returns its
// exit code and stderr.
func runBounded(t *testing.T, dir string, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv(env...)
	var stderr natstest.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("esjet %s still running after a minute, want a refusal:\n%s", strings.Join(args, " "), stderr.String())
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	default:
		t.Fatalf("run esjet: %v", err)
	}
	return -1, ""
}

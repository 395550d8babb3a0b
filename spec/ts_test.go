package spec_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// runTypeScript runs clients/ts's conformance runner against n.
func runTypeScript(t *testing.T, n *node) {
	nodeBin := requireTypeScript(t)
	dir, _ := filepath.Abs("../clients/ts")
	specDir, _ := filepath.Abs(".")
	cmd := exec.CommandContext(t.Context(), nodeBin, filepath.Join(dir, "dist", "test", "conformance.js"))
	cmd.Env = append(os.Environ(), "ESJET_NATS_URL="+n.natsURL, "ESJET_SPEC_DIR="+specDir)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("TypeScript conformance: %v", err)
	}
}

// requireTypeScript returns node's path once clients/ts is built (tsc).
// Without Node.js or the client's dependencies it says so in one line and
// skips — unless ESJET_CONFORMANCE_REQUIRE is set (.ci/run sets it after
// installing them), when it fails.
func requireTypeScript(t *testing.T) string {
	t.Helper()
	dir, _ := filepath.Abs("../clients/ts")
	missing := func(what string) {
		msg := "TypeScript tests not run: " + what + " (.ci/run installs it: cd clients/ts && npm ci)"
		if os.Getenv("ESJET_CONFORMANCE_REQUIRE") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		missing("node is not on PATH")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@nats-io", "transport-node")); err != nil {
		missing("clients/ts/node_modules is missing")
	}
	build := exec.Command(nodeBin, filepath.Join(dir, "node_modules", "typescript", "bin", "tsc"), "-p", dir)
	tscOnce.Do(func() { tscOut, tscErr = build.CombinedOutput() })
	if tscErr != nil {
		t.Fatalf("tsc -p clients/ts: %v\n%s", tscErr, tscOut)
	}
	return nodeBin
}

var (
	tscOnce sync.Once
	tscOut  []byte
	tscErr  error
)

package spec_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runPython runs clients/python's conformance runner against n, then the
// Python client's own tests (clients/python/tests/test_*.py).
func runPython(t *testing.T, n *node) {
	py, env := requirePython(t)
	dir, _ := filepath.Abs("../clients/python")
	specDir, _ := filepath.Abs(".")
	env = append(env, "ESJET_NATS_URL="+n.natsURL, "ESJET_SPEC_DIR="+specDir)
	for _, run := range []struct {
		what string
		args []string
	}{
		{"Python conformance", []string{filepath.Join(dir, "tests", "conformance.py")}},
		{"Python client tests", []string{"-m", "unittest", "discover", "-v", "-s", filepath.Join(dir, "tests"), "-p", "test_*.py"}},
	} {
		cmd := exec.CommandContext(t.Context(), py, run.args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		t.Logf("%s:\n%s", run.what, out)
		if err != nil {
			t.Errorf("%s: %v", run.what, err)
		}
	}
}

// requirePython returns python3's path and the environment in which it
// imports esjet_client from clients/python and nats-py from the copy
// vendored in clients/python/vendor (this project's machines reach no
// Python package index). Without python3 it says so in one line and skips —
// unless ESJET_CONFORMANCE_REQUIRE is set (.ci/run sets it), when it fails.
func requirePython(t *testing.T) (string, []string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		msg := "Python tests not run: python3 is not on PATH (clients/python needs Python 3.9 or later)"
		if os.Getenv("ESJET_CONFORMANCE_REQUIRE") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir, _ := filepath.Abs("../clients/python")
	path := filepath.Join(dir, "vendor") + string(filepath.ListSeparator) + dir
	var env []string
	for _, kv := range os.Environ() {
		if v, ok := strings.CutPrefix(kv, "PYTHONPATH="); ok && v != "" {
			path += string(filepath.ListSeparator) + v
		} else if !strings.HasPrefix(kv, "PYTHONPATH=") {
			env = append(env, kv)
		}
	}
	// No __pycache__ in the repository; output line by line through pipes.
	env = append(env, "PYTHONPATH="+path, "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	check := exec.Command(py, "-c", "import sys; assert sys.version_info >= (3, 9), sys.version; import nats.js, esjet_client")
	check.Env = env
	if out, err := check.CombinedOutput(); err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		t.Fatalf("python3 (%s) cannot import the vendored nats-py and esjet_client: %v: %s", py, err, lines[len(lines)-1])
	}
	return py, env
}

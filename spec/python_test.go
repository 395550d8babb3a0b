package spec_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runPython runs clients/python's conformance runner against n. It needs
// python3 with nats-py importable; without them it says so in one line and
// skips. (This project's machines reach no Python package index, so CI
// has no nats-py: see docs/clients.md. ESJET_CONFORMANCE_REQUIRE_PYTHON
// turns the skip into a failure where nats-py can be installed.)
func runPython(t *testing.T, n *node) {
	py, err := exec.LookPath("python3")
	if err == nil {
		out, ierr := exec.Command(py, "-c", "import nats.js").CombinedOutput()
		if ierr != nil {
			err = ierr
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			t.Logf("python3 -c 'import nats.js': %s", lines[len(lines)-1])
		}
	}
	if err != nil {
		msg := "Python conformance not run: python3 with nats-py is missing (pip install nats-py, then pip install ./clients/python)"
		if os.Getenv("ESJET_CONFORMANCE_REQUIRE_PYTHON") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir, _ := filepath.Abs("../clients/python")
	specDir, _ := filepath.Abs(".")
	cmd := exec.CommandContext(t.Context(), py, filepath.Join(dir, "tests", "conformance.py"))
	cmd.Env = append(os.Environ(), "ESJET_NATS_URL="+n.natsURL, "ESJET_SPEC_DIR="+specDir)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("Python conformance: %v", err)
	}
}

package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
)

// binary is the esjet binary built once for the whole package.
var binary string

// raceBuild says the tests run under the race detector (set by
// race_test.go): the esjet child they start is then built with it too.
var raceBuild bool

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "esjet-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "esjet")
	// The child is built as the tests are: with the race detector under
	// `go test -race` (what CI runs), without it under `go test ./...`,
	// where a race-built child costs several times the CPU and the
	// package would outlast go test's default ten minutes on two busy
	// cores. ESJET_E2E_NORACE=1 builds it without under -race too.
	build := exec.Command("go", "build", "-o", binary, "../cmd/node")
	if raceBuild && os.Getenv("ESJET_E2E_NORACE") == "" {
		build = exec.Command("go", "build", "-race", "-o", binary, "../cmd/node")
	}
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build esjet:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// cleanEnv is the test process's environment without ESJET_ variables, so a
// developer's shell cannot change what the tests see.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ESJET_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// node is a running `esjet run` child process.
type node struct {
	cmd        *exec.Cmd
	stderr     *natstest.Buffer
	natsURL    string
	natsListen string
	httpAddr   string
	done       chan error
	exited     chan struct{} // closed when the process has exited
}

var readyLine = regexp.MustCompile(`ready: namespace (\S+), nats nats://(\S+), http http://(\S+)`)

// startNode runs the binary in dir with a data dir under it, random ports and
// extra args, and returns once it printed its ready line.
func startNode(t *testing.T, dir string, args ...string) *node {
	t.Helper()
	return startNodeEnv(t, dir, nil, args...)
}

// startNodeEnv is startNode with extra environment variables (a failpoint).
func startNodeEnv(t *testing.T, dir string, env []string, args ...string) *node {
	t.Helper()
	all := append([]string{"run", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"}, args...)
	cmd := exec.Command(binary, all...)
	cmd.Dir = dir
	cmd.Env = cleanEnv(env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	n := &node{cmd: cmd, stderr: &natstest.Buffer{}, done: make(chan error, 1), exited: make(chan struct{})}
	cmd.Stderr = n.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	go func() {
		err := cmd.Wait()
		close(n.exited)
		n.done <- err
	}()
	t.Cleanup(func() {
		// n.exited, not cmd.ProcessState: Wait writes that in its own
		// goroutine (a data race when the node exited on its own).
		select {
		case <-n.exited:
		default:
			_ = cmd.Process.Kill()
			<-n.exited
		}
	})
	timeout := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("node exited before ready:\n%s", n.stderr.String())
			}
			if m := readyLine.FindStringSubmatch(line); m != nil {
				n.natsListen, n.httpAddr = m[2], m[3]
				n.natsURL = "nats://" + m[2]
				go func() {
					for range lines {
					}
				}()
				return n
			}
		case <-timeout:
			t.Fatalf("node not ready within 60s:\n%s", n.stderr.String())
		}
	}
}

// stop sends sig and waits for a clean exit (code 0).
func (n *node) stop(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := n.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-n.done:
		if err != nil {
			t.Fatalf("node exited with %v after %v:\n%s", err, sig, n.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("node still running 30s after %v:\n%s", sig, n.stderr.String())
	}
}

// crashed waits for the node to die of SIGKILL (a failpoint, or kill -9).
func (n *node) crashed(t *testing.T) {
	t.Helper()
	select {
	case err := <-n.done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != -1 {
			t.Fatalf("node exited with %v, want killed by a signal:\n%s", err, n.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("node did not crash within 30s:\n%s", n.stderr.String())
	}
}

// kill9 kills the node with SIGKILL and waits for it.
func (n *node) kill9(t *testing.T) {
	t.Helper()
	_ = n.cmd.Process.Kill()
	n.crashed(t)
}

// runCLI runs the binary to completion in dir and returns its stdout; any
// failure fails the test.
func runCLI(t *testing.T, dir string, args ...string) string {
	t.Helper()
	stdout, stderr, code := runCLIFailEnv(t, dir, nil, args...)
	if code != 0 {
		t.Fatalf("esjet %s: exit %d\n%s", strings.Join(args, " "), code, stderr)
	}
	return stdout
}

// runCLIFail runs the binary expecting it may fail, returning its outputs
// and exit code.
func runCLIFail(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	return runCLIFailEnv(t, dir, nil, args...)
}

func runCLIFailEnv(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv(env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), stderr.String(), 0
	case errors.As(err, &ee):
		return stdout.String(), stderr.String(), ee.ExitCode()
	default:
		t.Fatalf("run esjet: %v", err)
		return "", "", -1
	}
}

// freeAddr returns a loopback address nothing listens on, reserved for the
// test (natstest.Addr: two picks never collide, in this binary or another).
func freeAddr(t *testing.T) string {
	t.Helper()
	return natstest.Addr(t)
}

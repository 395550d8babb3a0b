package spec_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
)

// The conformance suite runs against the esjet binary, built once, as a
// child process: what a TypeScript or Python team runs beside their
// service.

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
	buildOut  []byte
)

// esjetBinary builds ./cmd/node into a temporary directory (once per test
// binary) and returns its path.
func esjetBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "esjet-spec-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "esjet")
		cmd := exec.Command("go", "build", "-o", binary, "../cmd/node")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build ./cmd/node: %v\n%s", buildErr, buildOut)
	}
	return binary
}

// node is a running `esjet run`.
type node struct {
	natsURL, httpURL string
	stderr           *natstest.Buffer
}

var readyLine = regexp.MustCompile(`ready: namespace (\S+), nats (nats://\S+), http (http://\S+)`)

// startNode runs the binary in a temporary directory on free ports (the
// demo namespace, its services inside) and returns once it is ready; the
// node is killed when the test ends. args are more flags (--config).
func startNode(t *testing.T, args ...string) *node {
	t.Helper()
	bin := esjetBinary(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, append([]string{"run", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"}, args...)...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ESJET_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	n := &node{stderr: &natstest.Buffer{}}
	cmd.Stderr = n.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	ready := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := readyLine.FindStringSubmatch(sc.Text()); m != nil {
				ready <- m
			}
		}
	}()
	select {
	case m := <-ready:
		n.natsURL, n.httpURL = m[2], m[3]
		return n
	case <-exited:
		t.Fatalf("esjet exited before it was ready:\n%s", n.stderr.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("esjet not ready within 90s:\n%s", n.stderr.String())
	}
	return nil
}

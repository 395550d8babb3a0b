package main

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
)

// startTestNode runs `esjet run` in-process on a fixed loopback port (the
// CLI refuses port 0) without the demo services, until the test ends, and
// returns the flags that reach it.
func startTestNode(t *testing.T, ns string) []string {
	t.Helper()
	addr := natstest.Addr(t)
	flags := []string{"--data-dir", filepath.Join(t.TempDir(), "data"), "--listen", addr, "--http", "none", "--namespace", ns}
	ctx, cancel := context.WithCancel(context.Background())
	var nodeOut, nodeErr natstest.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"run"}, flags...), []string{"ESJET_DEMO_SERVICES=false"}, &nodeOut, &nodeErr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("node: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("node did not stop")
		}
	})
	waitFor(t, &nodeOut, &nodeErr, done, " ready: ")
	return flags
}

// flagValue returns the value after name in flags.
func flagValue(flags []string, name string) string {
	for i := 0; i+1 < len(flags); i++ {
		if flags[i] == name {
			return flags[i+1]
		}
	}
	return ""
}

// waitForLine waits (30s) until out has a line matching re and returns its
// submatches; it fails if the command returned first.
func waitForLine(t *testing.T, out, errOut *natstest.Buffer, done <-chan error, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	natstest.Eventually(t, 30*time.Second, func() bool {
		select {
		case err := <-done:
			t.Fatalf("returned before a line matching %q: %v\n%s", re, err, errOut.String())
		default:
		}
		m = re.FindStringSubmatch(out.String())
		return m != nil
	})
	return m
}

// waitFor waits until out contains line (see waitForLine).
func waitFor(t *testing.T, out, errOut *natstest.Buffer, done <-chan error, line string) {
	t.Helper()
	waitForLine(t, out, errOut, done, regexp.MustCompile(regexp.QuoteMeta(line)))
}

package main

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
)

// TestRunServesUntilContextEnds runs the whole node in-process on random
// ports: ready line, /readyz answering, clean return when the context ends
// (what SIGINT/SIGTERM do through signal.NotifyContext).
func TestRunServesUntilContextEnds(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr natstest.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--namespace", "inproc"}, nil, &stdout, &stderr)
	}()
	httpAddr := waitForLine(t, &stdout, &stderr, done, regexp.MustCompile(`http http://(\S+)`))[1]
	resp, err := http.Get("http://" + httpAddr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz = %d", resp.StatusCode)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after cancel: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	if !strings.Contains(stderr.String(), "msg=stopped") {
		t.Fatalf("no clean stop logged:\n%s", stderr.String())
	}
}

func TestRunRejectsUnknownFlagsAndArgs(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"--no-such-flag"}, nil, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("unknown flag: err = %v", err)
	}
	if err := run(t.Context(), []string{"run", "extra"}, nil, &stdout, &stderr); err == nil {
		t.Fatal("stray argument accepted")
	}
}

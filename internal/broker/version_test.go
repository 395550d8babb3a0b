package broker

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/natstest"
)

// oldServerVersion is the release the compatibility tests run against: on it
// a node printed ready, answered commands, and no command with deliver_after
// ever fired (message schedules are 2.12).
const oldServerVersion = "v2.11.12"

// oldServerBinary builds nats-server at version from the module proxy the
// first time and keeps it under os.TempDir for later runs.
func oldServerBinary(t *testing.T, version string) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "esjet-test-nats-server", version)
	bin := filepath.Join(dir, "nats-server")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	tmp, err := os.MkdirTemp(os.TempDir(), "esjet-build-nats-server-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "install", "github.com/nats-io/nats-server/v2@"+version)
	build.Dir = tmp // outside this module: go install pkg@version ignores it anyway
	build.Env = append(os.Environ(), "GOBIN="+tmp, "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build nats-server %s: %v\n%s", version, err, out)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	// Rename is atomic: a concurrent run sees the whole binary or none.
	if err := os.Rename(filepath.Join(tmp, "nats-server"), bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// runOldServer runs the older nats-server with JetStream on addr and returns
// its URL once it accepts clients.
func runOldServer(t *testing.T, addr string) string {
	t.Helper()
	bin := oldServerBinary(t, oldServerVersion)
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "-js", "-a", host, "-p", port, "-sd", t.TempDir())
	var out natstest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	url := "nats://" + addr
	natstest.Eventually(t, 20*time.Second, func() bool {
		nc, err := nats.Connect(url)
		if err != nil {
			return false
		}
		nc.Close()
		return true
	})
	return url
}

func externalConfig(t *testing.T, urls ...string) config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.NATS.Mode = config.ModeExternal
	cfg.NATS.External.URLs = urls
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestExternalRefusesAnOlderServer(t *testing.T) {
	url := runOldServer(t, closedPort(t))
	b, err := Start(t.Context(), externalConfig(t, url), nil)
	if err == nil {
		_ = b.Close(t.Context())
		t.Fatalf("Start against nats-server %s succeeded, want a refusal", oldServerVersion)
	}
	var old *ServerTooOldError
	if !errors.Is(err, ErrServerTooOld) || !errors.As(err, &old) {
		t.Fatalf("Start = %v, want ErrServerTooOld", err)
	}
	msg := err.Error()
	for _, want := range []string{strings.TrimPrefix(oldServerVersion, "v"), url, "2.12.0", "message schedules", "deliver_after", "Upgrade"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "priority groups") {
		t.Errorf("refusal %q names priority groups, which %s has", msg, oldServerVersion)
	}
}

// TestExternalRefusesAnOlderServerAfterReconnect: connected to a current
// server, the broker reconnects to an older one when the current one goes
// away; it gives the connection up (Done, Err) instead of acting on it.
func TestExternalRefusesAnOlderServerAfterReconnect(t *testing.T) {
	current := start(t, embeddedConfig(t, "127.0.0.1:0"))
	oldAddr := closedPort(t) // nothing listens there yet: the first connect goes to current
	b := start(t, externalConfig(t, current.ClientURL(), "nats://"+oldAddr))
	if got := b.Conn().ConnectedUrl(); got != current.ClientURL() {
		t.Fatalf("connected to %s, want %s", got, current.ClientURL())
	}
	roundTrip(t, b.JetStream(), "BEFORE", "ok")

	runOldServer(t, oldAddr)
	if err := current.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("still connected 30s after the only server left is %s (status %s, url %s)", oldServerVersion, b.Conn().Status(), b.Conn().ConnectedUrl())
	}
	if err := b.Err(); !errors.Is(err, ErrServerTooOld) || !strings.Contains(err.Error(), oldAddr) {
		t.Fatalf("Err() = %v, want ErrServerTooOld naming %s", err, oldAddr)
	}
}

func TestServerVersionRequirements(t *testing.T) {
	for _, tc := range []struct {
		version string
		missing []string // substrings; nil: accepted
	}{
		{"2.9.10", []string{"priority groups", "batched direct get", "message schedules"}},
		{"2.10.24", []string{"priority groups", "batched direct get", "message schedules"}},
		{"2.11.12", []string{"message schedules"}},
		{"2.12.0-RC.1", nil},
		{"2.12.0", nil},
		{"2.15.2", nil},
		{"3.0.0", nil},
		{"garbage", []string{"message schedules"}},
	} {
		err := checkServerVersion("nats://x:4222", tc.version)
		if tc.missing == nil {
			if err != nil {
				t.Errorf("%s: refused: %v", tc.version, err)
			}
			continue
		}
		if !errors.Is(err, ErrServerTooOld) {
			t.Errorf("%s: accepted (%v), want refused", tc.version, err)
			continue
		}
		for _, m := range tc.missing {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("%s: refusal %q does not name %s", tc.version, err, m)
			}
		}
	}
	err := checkAPILevel("nats://x:4222", "2.12.1", 1)
	if !errors.Is(err, ErrServerTooOld) || !strings.Contains(err.Error(), "API level 1") || !strings.Contains(err.Error(), "message schedules") {
		t.Errorf("API level 1 behind a 2.12.1 server: %v, want refused naming the level and schedules", err)
	}
	if err := checkAPILevel("nats://x:4222", "2.12.1", 2); err != nil {
		t.Errorf("API level 2: %v", err)
	}
	if MinServerVersion != "2.12.0" || MinAPILevel != 2 {
		t.Errorf("minimum = %s / level %d, want 2.12.0 / 2", MinServerVersion, MinAPILevel)
	}
}

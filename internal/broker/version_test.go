package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/natstest"
)

// oldServerVersion is the release the compatibility tests run against: on it
// a node printed ready, answered commands, and no command with deliver_after
// ever fired (message schedules are 2.12).
const oldServerVersion = "v2.11.12"

// oldServerBinary builds nats-server at version the first time (from the
// module cache, else the module proxy, failing in one line within seconds
// when neither has it) and keeps it under os.TempDir for later runs.
func oldServerBinary(t *testing.T, version string) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "esjet-test-nats-server", version)
	bin := filepath.Join(dir, "nats-server")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	tmp := t.TempDir()
	natstest.GoInstall(t, "build nats-server "+version, natsServerModule, natsServerModule, version, tmp)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	// Rename is atomic: a concurrent run sees the whole binary or none.
	if err := os.Rename(filepath.Join(tmp, "nats-server"), bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

const natsServerModule = "github.com/nats-io/nats-server/v2"

// serverSource is the directory of nats-server's module source at version
// (go mod download, run outside this module), from the module cache or, if
// it is not there, the module proxy.
func serverSource(t *testing.T, version string) string {
	t.Helper()
	tmp := t.TempDir()
	download := func(env ...string) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", natsServerModule+"@"+version)
		cmd.Dir = tmp
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		var m struct{ Dir, Error string }
		if jerr := json.Unmarshal(out, &m); jerr != nil && err == nil {
			err = jerr
		}
		switch {
		case m.Error != "":
			return "", errors.New(m.Error)
		case err != nil:
			return "", err
		case m.Dir == "":
			return "", fmt.Errorf("go mod download printed no Dir: %s", lastLine(out))
		}
		return m.Dir, nil
	}
	if dir, err := download("GOPROXY=off"); err == nil {
		return dir
	}
	natstest.NeedModuleProxy(t, "download nats-server "+version+"'s source", natsServerModule, version)
	dir, err := download()
	if err != nil {
		t.Fatalf("download nats-server %s's source (go mod download %s@%s): %v", version, natsServerModule, version, err)
	}
	return dir
}

// lastLine is the last non-empty line of out.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// runOldServer runs the older nats-server with JetStream on addr and returns
// its URL once it accepts clients.
func runOldServer(t *testing.T, addr string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	runServerProcess(t, addr, oldServerBinary(t, oldServerVersion), "-js", "-a", host, "-p", port, "-sd", t.TempDir())
	return "nats://" + addr
}

// runServerConfig runs nats-server at version as a child process with
// config (an accounts block, as esjet permissions prints it) on a free
// loopback port, JetStream's store under t.TempDir(), and returns its URL
// once it accepts connections.
func runServerConfig(t *testing.T, version, config string) string {
	t.Helper()
	bin := oldServerBinary(t, version)
	addr := closedPort(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "nats-server.conf")
	config += fmt.Sprintf("\nlisten: %q\njetstream {\n  store_dir: %q\n}\n", addr, filepath.Join(dir, "jetstream"))
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	runServerProcess(t, addr, bin, "-c", file)
	return "nats://" + addr
}

// runServerProcess runs bin with args, stops it when the test ends, and
// waits until it accepts connections on addr; if it exits first, the test
// fails with its output.
func runServerProcess(t *testing.T, addr, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out natstest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-exited:
			t.Fatalf("%s %s exited: %s\n%s", bin, strings.Join(args, " "), cmd.ProcessState, out.String())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not accept connections on %s after 20s:\n%s", bin, addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
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

package broker

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/esjet/esjet/config"
)

// lockHolderEnv makes the test binary a child that takes the data dir named
// by the variable, prints "locked" and waits to be killed.
const lockHolderEnv = "ESJET_TEST_HOLD_DATA_DIR"

func holdLock(dir string) {
	l, err := LockDataDir(dir, NewHolder("lock holder", "127.0.0.1:1"))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until killed
	_ = l.Release()
	os.Exit(0)
}

func TestSecondBrokerOnOneDataDirIsRefusedNamingTheHolder(t *testing.T) {
	cfg := embeddedConfig(t, "127.0.0.1:0")
	first := start(t, cfg)
	roundTrip(t, first.JetStream(), "OWNED", "first")

	second := cfg
	second.NATS.Embedded.Listen = "127.0.0.1:0" // another port: the obvious move after "address in use"
	b, err := Start(t.Context(), second, nil)
	if err == nil {
		_ = b.Close(t.Context())
		t.Fatal("a second broker started on a data dir another one owns")
	}
	var locked *DataDirLockedError
	if !errors.Is(err, ErrDataDirLocked) || !errors.As(err, &locked) {
		t.Fatalf("Start = %v, want ErrDataDirLocked", err)
	}
	host, _ := os.Hostname()
	for _, want := range []string{"pid " + strconv.Itoa(os.Getpid()), host, first.ClientURL(), cfg.NATS.Embedded.DataDir, "stop that process", "its own data dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if locked.Holder.PID != os.Getpid() || locked.Holder.Listen != first.ClientURL() {
		t.Errorf("holder = %+v, want pid %d listening on %s", locked.Holder, os.Getpid(), first.ClientURL())
	}

	// The owner is untouched and keeps serving; once it closes, the dir is free.
	roundTrip(t, first.JetStream(), "STILL", "serving")
	assertMsg(t, first.JetStream(), "OWNED", 1, "first")
	if err := first.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	after := start(t, second)
	assertMsg(t, after.JetStream(), "OWNED", 1, "first")
}

func TestDataDirLockOfAKilledProcessDoesNotBlock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), lockHolderEnv+"="+dir)
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "locked\n" {
		_ = child.Process.Kill()
		_ = child.Wait()
		t.Fatalf("child: %q, %v", line, err)
	}

	_, err = LockDataDir(dir, NewHolder("test", ""))
	var locked *DataDirLockedError
	if !errors.As(err, &locked) || locked.Holder.PID != child.Process.Pid || locked.Holder.Program != "lock holder" {
		_ = child.Process.Kill()
		_ = child.Wait()
		t.Fatalf("LockDataDir while the child holds it = %v, want refused naming pid %d", err, child.Process.Pid)
	}

	if err := child.Process.Kill(); err != nil { // SIGKILL: no chance to release
		t.Fatal(err)
	}
	_ = child.Wait()
	if data, err := os.ReadFile(filepath.Join(dir, LockFileName)); err != nil || !strings.Contains(string(data), strconv.Itoa(child.Process.Pid)) {
		t.Fatalf("lock file after kill -9 = %q, %v; want the dead holder's details left behind", data, err)
	}

	cfg := config.Default()
	cfg.NATS.Embedded.DataDir = dir
	cfg.NATS.Embedded.Listen = config.ListenNone
	b := start(t, cfg) // the stale lock file does not block
	roundTrip(t, b.JetStream(), "AFTERKILL", "ok")
}

// TestADataDirSharingAStoreWithAHeldOneIsRefused: a nats-server keeps its
// store in <data dir>/jetstream and moves a store it finds in <data dir>
// into it, so D and D/jetstream are one store. A server started on a
// running node's D/jetstream (the store directory the node's log prints)
// moved the node's streams away under it; now either order is refused,
// naming the holder, and a sibling is not.
func TestADataDirSharingAStoreWithAHeldOneIsRefused(t *testing.T) {
	root := t.TempDir()
	node := filepath.Join(root, "data")
	store := filepath.Join(node, "jetstream")
	for _, c := range []struct{ held, asked string }{{node, store}, {store, node}} {
		held, err := LockDataDir(c.held, NewHolder("esjet node", "127.0.0.1:4222"))
		if err != nil {
			t.Fatal(err)
		}
		l, err := LockDataDir(c.asked, NewHolder("esjet server", "127.0.0.1:4223"))
		var locked *DataDirLockedError
		if err == nil || !errors.As(err, &locked) || !errors.Is(err, ErrDataDirLocked) || locked.Dir != c.held || locked.Overlaps != c.asked ||
			locked.Holder.PID != os.Getpid() || !strings.Contains(err.Error(), "shares its store with data dir "+c.held) {
			_ = l.Release()
			t.Fatalf("LockDataDir(%s) while %s is held = %v", c.asked, c.held, err)
		}
		if _, err := os.Stat(filepath.Join(c.asked, LockFileName)); c.asked == store && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the refused lock left a file in the held node's store: %v", err)
		}
		if err := held.Release(); err != nil {
			t.Fatal(err)
		}
		// Once the other is released the same dir is taken.
		l, err = LockDataDir(c.asked, NewHolder("esjet server", "127.0.0.1:4223"))
		if err != nil {
			t.Fatalf("LockDataDir(%s) after %s was released: %v", c.asked, c.held, err)
		}
		_ = l.Release()
	}
	// A sibling shares nothing.
	a, err := LockDataDir(filepath.Join(root, "a"), NewHolder("esjet node", "127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Release() }()
	b, err := LockDataDir(filepath.Join(root, "b"), NewHolder("esjet node", "127.0.0.1:2"))
	if err != nil {
		t.Fatalf("a sibling data dir was refused: %v", err)
	}
	_ = b.Release()
}

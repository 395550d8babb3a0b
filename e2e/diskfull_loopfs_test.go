//go:build loopfs

package e2e

// The disk-full scenario on a real filesystem: a small ext4 image mounted
// through a loop device, nearly filled by a ballast file, holds the node's
// data dir. It needs root, mount, losetup and mkfs.ext4, so it is built
// only with the loopfs tag:
//
//	sudo go test -race -tags loopfs -run DiskFullOnLoop -v ./e2e/

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

func dfRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func TestDiskFullOnLoopFilesystem(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the loopfs variant needs root (mount, losetup)")
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	dfRun(t, "truncate", "-s", "64M", img)
	dfRun(t, "mkfs.ext4", "-q", "-F", "-m", "0", img)
	dfRun(t, "mount", "-o", "loop", img, mnt)
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	// Leave about 3MiB free: the streams' files plus a few hundred trips.
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	ballast := filepath.Join(mnt, "ballast")
	dfRun(t, "fallocate", "-l", strconv.FormatInt(free-3<<20, 10), ballast)

	// max_store above the filesystem's size: the disk, not JetStream's
	// accounting, runs out first.
	env := append([]string{"ESJET_OUTBOX_ACK_WAIT=2s", "ESJET_NATS_EMBEDDED_MAX_STORE=1GiB"}, noDemo...)
	nodeDir := filepath.Join(mnt, "node")
	if err := os.Mkdir(nodeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	n := startNodeEnv(t, nodeDir, env)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node log:\n%s", n.stderr.String())
		}
	})
	acked, sent, refused := dfFill(t, n, "lf", 20000)
	dfAfterFull(t, "disk-full-loopfs", n, acked, sent, refused, func() *node {
		if err := os.Remove(ballast); err != nil {
			t.Fatal(err)
		}
		n = startNodeEnv(t, nodeDir, env)
		return n
	})
}

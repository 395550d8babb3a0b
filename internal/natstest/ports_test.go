package natstest

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// A reserved port is handed out once, lies below the ephemeral range, and
// its lock is held against every other taker (another test binary opens the
// lock file as this one does) until the test ends.
func TestPortsAreReservedAgainstEveryOtherTaker(t *testing.T) {
	ports := Ports(t, 100)
	low := ephemeralLow()
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if p < 10000 || p >= low {
			t.Errorf("port %d: want one in [10000, %d), outside the ephemeral range", p, low)
		}
		f, err := os.OpenFile(filepath.Join(os.TempDir(), "esjet-test-ports", strconv.Itoa(p)), os.O_RDWR, 0)
		if err != nil {
			t.Fatalf("port %d: no lock file: %v", p, err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		_ = f.Close()
		if err == nil {
			t.Errorf("port %d: another taker could lock it while the test holds it", p)
		}
	}
}

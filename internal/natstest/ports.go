package natstest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Ports returns n loopback ports nothing listens on, reserved for the test
// until it ends: no other call of Ports or Addr — in this test binary or in
// another one on the machine (flock conflicts between two opens of a file even in one process) (a second `go test` beside this one) — hands
// out the same port meanwhile, and none is in the kernel's ephemeral range,
// so no ":0" listener or outgoing connection can take it either.
//
// Why: a port found by listening on ":0" and closing is free only for a
// moment; two such picks made one after the other can return the same
// port (the kernel hands out a just-closed port again), and a server
// started on it then fails with "address already in use". A port taken
// here is held by an exclusive lock on a file named after it (flock: the
// lock goes when the process does, even on kill -9), and is checked free
// by binding it before it is handed out.
func Ports(tb testing.TB, n int) []int {
	tb.Helper()
	ports := make([]int, 0, n)
	for range n {
		p, release, err := reservePort()
		if err != nil {
			tb.Fatalf("natstest: %v", err)
		}
		tb.Cleanup(release)
		ports = append(ports, p)
	}
	return ports
}

// Addr returns one address from [Ports]: "127.0.0.1:<port>".
func Addr(tb testing.TB) string {
	tb.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Ports(tb, 1)[0]))
}

// reservePort picks a free port below the ephemeral range, locks it, and
// returns it with the function that gives it back.
func reservePort() (int, func(), error) {
	low := ephemeralLow()
	dir := filepath.Join(os.TempDir(), "esjet-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, nil, fmt.Errorf("port lock directory: %w", err)
	}
	for range 1000 {
		p := 10000 + rand.IntN(low-10000)
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return 0, nil, fmt.Errorf("port lock file: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close() // a test holds it (here or in another process)
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			_ = f.Close() // in use by something that does not reserve
			continue
		}
		_ = l.Close()
		return p, func() { _ = f.Close() }, nil // closing releases the lock
	}
	return 0, nil, fmt.Errorf("no free loopback port between 10000 and %d after 1000 tries", low)
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// when it cannot be read).
func ephemeralLow() int {
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 12000 {
				low = n
			}
		}
	}
	return low
}

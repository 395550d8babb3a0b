// Package failpoint lets crash tests kill the process at a named point.
//
// When the environment variable ESJET_FAILPOINT names a point and the code
// reaches Hit(point), the process sends itself SIGKILL on the spot: no
// defers run, no buffers flush, no connection is drained — the worst moment
// an operator's kill -9 or a power cut could choose. Points are compiled in
// always; with the variable unset, Hit is a string comparison.
//
// ESJET_FAILPOINT may name a point with a count, "relay-after-publish:3",
// to crash on the third time it is reached.
package failpoint

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// EnvVar names the failpoint to crash at.
const EnvVar = "ESJET_FAILPOINT"

// Points used by esjet, for tests and operators.
const (
	// AfterAppend: a decision is stored and acknowledged, before the reply.
	AfterAppend = "after-append"
	// RelayAfterPublish: the relay published a batch's commands to OUTBOX
	// and got their acks, before it acked the decisions.
	RelayAfterPublish = "relay-after-publish"
	// RelayBeforePublish: the relay fetched decisions, before publishing.
	RelayBeforePublish = "relay-before-publish"
)

var (
	armed string
	after int64
	hits  atomic.Int64
)

func init() {
	v := os.Getenv(EnvVar)
	if v == "" {
		return
	}
	armed, after = v, 1
	if name, n, ok := strings.Cut(v, ":"); ok {
		if c, err := strconv.ParseInt(n, 10, 64); err == nil && c > 0 {
			armed, after = name, c
		}
	}
}

// Hit kills the process with SIGKILL if point is the armed failpoint and
// this is the configured hit.
func Hit(point string) {
	if armed == "" || point != armed {
		return
	}
	if hits.Add(1) < after {
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is not catchable; wait for it
}

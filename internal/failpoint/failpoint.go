package failpoint

import (
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// EnvVar arms failpoints; EnvVarSingle is the older one-point form.
const (
	EnvVar       = "ESJET_FAILPOINTS"
	EnvVarSingle = "ESJET_FAILPOINT"
)

// Points used by esjet.
const (
	BeforeAppend       = "before-append"        // a decision is made, not yet stored
	AfterAppend        = "after-append"         // stored and acknowledged, before the reply
	RelayBeforePublish = "relay-before-publish" // the relay fetched decisions, before publishing
	RelayAfterPublish  = "relay-after-publish"  // OUTBOX acked the batch's commands, before the relay acks
	WorkerBeforeCall   = "worker-before-call"   // a worker is about to call the handler
	WorkerAfterCall    = "worker-after-call"    // the handler returned, nothing recorded yet
	WorkerAfterReceipt = "worker-after-receipt" // the receipt is written, the result not yet reported
	WorkerBeforeAck    = "worker-before-ack"    // the result is reported, the command not yet acked
)

// Points of esjet provision's move of an older DLQ (internal/streams).
const (
	DLQMigrateCopy    = "dlq-migrate-copy"    // an older dead letter was copied to today's subjects
	DLQMigrateUpdated = "dlq-migrate-updated" // the DLQ keeps one message per subject now; its older subjects not yet emptied
)

// Points of archiving (internal/archive), per aggregate.
const (
	ArchiveAfterPut       = "archive-after-put"       // the archive object is written and verified, no tombstone yet
	ArchiveAfterTombstone = "archive-after-tombstone" // the tombstone is appended, the archived messages not yet purged
)

// Known lists every point a node reaches under load (the fault suite
// kills a node at each in turn).
var Known = []string{BeforeAppend, AfterAppend, RelayBeforePublish, RelayAfterPublish,
	WorkerBeforeCall, WorkerAfterCall, WorkerAfterReceipt, WorkerBeforeAck}

// Upgrade lists the points of one-time upgrades, reached only when there
// is something older to move.
var Upgrade = []string{DLQMigrateCopy, DLQMigrateUpdated}

// Archive lists the points of an archive run.
var Archive = []string{ArchiveAfterPut, ArchiveAfterTombstone}

type action struct {
	kill  bool
	stop  bool
	sleep time.Duration
	at    int64 // act on this hit (1-based)
	hits  atomic.Int64
}

var armed map[string]*action

// stopSelf sends the process SIGSTOP; a test replaces it to see that Hit
// waits for SIGCONT however late the stop takes effect.
var stopSelf = func() { _ = syscall.Kill(os.Getpid(), syscall.SIGSTOP) }

func init() {
	var err error
	armed, err = Parse(os.Getenv(EnvVar))
	if err != nil {
		fmt.Fprintf(os.Stderr, "esjet: %s: %v\n", EnvVar, err)
		os.Exit(2)
	}
	if v := os.Getenv(EnvVarSingle); v != "" {
		name, n, _ := strings.Cut(v, ":")
		spec := name + "=kill"
		if n != "" {
			spec += "@" + n
		}
		more, err := Parse(spec)
		if err != nil {
			fmt.Fprintf(os.Stderr, "esjet: %s: %v\n", EnvVarSingle, err)
			os.Exit(2)
		}
		if armed == nil {
			armed = more
		} else {
			for k, a := range more {
				armed[k] = a
			}
		}
	}
}

// Parse reads a failpoints spec ("point=kill@3,point2=sleep(2s)").
func Parse(spec string) (map[string]*action, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	out := map[string]*action{}
	for _, item := range strings.Split(spec, ",") {
		name, act, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return nil, fmt.Errorf("%q: want point=kill[@N], point=stop[@N] or point=sleep(d)[@N]", item)
		}
		known := false
		for _, k := range append(append(slices.Clone(Known), Upgrade...), Archive...) {
			known = known || k == name
		}
		if !known {
			return nil, fmt.Errorf("unknown failpoint %q (known: %s)", name, strings.Join(append(append(slices.Clone(Known), Upgrade...), Archive...), ", "))
		}
		a := &action{at: 1}
		if body, n, ok := strings.Cut(act, "@"); ok {
			c, err := strconv.ParseInt(n, 10, 64)
			if err != nil || c < 1 {
				return nil, fmt.Errorf("%q: @%s is not a positive count", item, n)
			}
			a.at, act = c, body
		}
		switch {
		case act == "kill":
			a.kill = true
		case act == "stop":
			a.stop = true
		case strings.HasPrefix(act, "sleep(") && strings.HasSuffix(act, ")"):
			d, err := time.ParseDuration(act[len("sleep(") : len(act)-1])
			if err != nil {
				return nil, fmt.Errorf("%q: %v", item, err)
			}
			a.sleep = d
		default:
			return nil, fmt.Errorf("%q: action %q: want kill, stop or sleep(d)", item, act)
		}
		out[name] = a
	}
	return out, nil
}

// Hit acts if point is armed and this is the hit it waits for.
func Hit(point string) {
	a := armed[point]
	if a == nil {
		return
	}
	if n := a.hits.Add(1); n != a.at {
		return
	}
	if a.sleep > 0 {
		time.Sleep(a.sleep)
		return
	}
	if a.stop {
		// The whole process stops here until someone sends SIGCONT (the
		// test that armed it): a pause no goroutine of it can notice.
		// kill(getpid) hands SIGSTOP to the process, not to this thread:
		// until the thread that takes it is scheduled, this one runs on
		// (on a loaded machine, long enough to make the very call the
		// point is before). So wait for SIGCONT, which comes only after
		// the stop.
		cont := make(chan os.Signal, 1)
		signal.Notify(cont, syscall.SIGCONT)
		defer signal.Stop(cont)
		stopSelf()
		<-cont
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is not catchable; wait for it
}

package failpoint

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	got, err := Parse("after-append=kill@3, worker-after-call=kill,relay-after-publish=sleep(2s)@2,worker-before-call=stop@4")
	if err != nil {
		t.Fatal(err)
	}
	if a := got[AfterAppend]; a == nil || !a.kill || a.at != 3 {
		t.Errorf("after-append: %+v", a)
	}
	if a := got[WorkerAfterCall]; a == nil || !a.kill || a.at != 1 {
		t.Errorf("worker-after-call: %+v", a)
	}
	if a := got[RelayAfterPublish]; a == nil || a.sleep != 2*time.Second || a.at != 2 {
		t.Errorf("relay-after-publish: %+v", a)
	}
	if a := got[WorkerBeforeCall]; a == nil || !a.stop || a.kill || a.at != 4 {
		t.Errorf("worker-before-call: %+v", a)
	}
	for _, bad := range []string{"nope=kill", "after-append", "after-append=explode", "after-append=kill@0", "after-append=sleep(x)"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := Parse("nope=kill"); err == nil || !strings.Contains(err.Error(), "known:") {
		t.Errorf("unknown point error does not list the known ones: %v", err)
	}
}

func TestSleepActsOnTheConfiguredHitOnly(t *testing.T) {
	a, _ := Parse("before-append=sleep(50ms)@2")
	armed = a
	defer func() { armed = nil }()
	t0 := time.Now()
	Hit(BeforeAppend)
	if time.Since(t0) > 40*time.Millisecond {
		t.Fatal("slept on the first hit")
	}
	t0 = time.Now()
	Hit(BeforeAppend)
	if time.Since(t0) < 50*time.Millisecond {
		t.Fatal("did not sleep on the second hit")
	}
	Hit("worker-before-ack") // not armed: nothing
}

// TestStopReturnsOnlyAfterSIGCONT: kill(getpid, SIGSTOP) goes to the
// process, and the goroutine that sent it runs on until the thread taking
// it is scheduled; on a loaded machine it made the very call the point is
// before (the fencing e2e saw the 'stopped' node's call applied). Here the
// stop never takes effect at all: Hit must still not return before SIGCONT.
func TestStopReturnsOnlyAfterSIGCONT(t *testing.T) {
	a, _ := Parse("worker-before-call=stop@1")
	armed = a
	stopped := make(chan struct{})
	stopSelf = func() { close(stopped) } // the stop lags: not taken yet
	defer func() { armed = nil; stopSelf = func() { _ = syscall.Kill(os.Getpid(), syscall.SIGSTOP) } }()
	returned := make(chan struct{})
	go func() {
		Hit(WorkerBeforeCall)
		close(returned)
	}()
	<-stopped
	select {
	case <-returned:
		t.Fatal("Hit returned before the process was continued: the caller went on to its call")
	case <-time.After(200 * time.Millisecond):
	}
	for {
		// SIGCONT to a running process only notifies; send until Hit sees it
		// (its signal.Notify may not be in place the first time).
		if err := syscall.Kill(os.Getpid(), syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		select {
		case <-returned:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

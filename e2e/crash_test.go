package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
)

// noDemo runs a node without the in-process demo services: commands stay
// in OUTBOX, so these tests see exactly what the log and the relay did.
var noDemo = []string{"ESJET_DEMO_SERVICES=false"}

// commandCopies reads, through NATS only, every command id recorded in the
// namespace's decisions and how many times each is stored in OUTBOX. ok is
// false when a read failed (a cluster still electing a leader): the caller
// reads again rather than judge an incomplete picture.
func commandCopies(t *testing.T, url, ns string) (recorded []string, copies map[string]int, ok bool) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, nil, false
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ok = true
	// Reads are direct gets, which any replica in sync may answer: on a
	// cluster, a member just restarted can answer "not found" for a message
	// it has not caught up with. EVENTS never deletes, so a gap there is
	// such a read and the picture is incomplete; in OUTBOX it may also be a
	// fired schedule, purged (a real gap makes a command look missing, and
	// the caller reads again).
	read := func(stream string, fn func(*jetstream.RawStreamMsg)) {
		gapsAllowed := strings.HasSuffix(stream, "_OUTBOX")
		// Each request gets a few seconds, not the whole read's budget: one
		// drawn by a member that does not answer (a cluster after a fault)
		// fails this read early, and the caller reads again.
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		st, err := js.Stream(rctx, stream)
		rcancel()
		if err != nil {
			ok = false
			return
		}
		info := st.CachedInfo().State
		for seq := info.FirstSeq; info.Msgs > 0 && seq <= info.LastSeq; seq++ {
			rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
			m, err := st.GetMsg(rctx, seq)
			rcancel()
			switch {
			case err == nil:
				fn(m)
			case errors.Is(err, jetstream.ErrMsgNotFound) && gapsAllowed:
			default:
				ok = false
				return
			}
		}
	}
	up := strings.ToUpper(ns)
	read(up+"_EVENTS", func(m *jetstream.RawStreamMsg) {
		var d struct{ Commands []struct{ ID string } }
		if err := json.Unmarshal(m.Data, &d); err != nil {
			t.Fatalf("decision at seq %d: %v", m.Sequence, err)
		}
		for _, c := range d.Commands {
			recorded = append(recorded, c.ID)
		}
	})
	copies = map[string]int{}
	read(up+"_OUTBOX", func(m *jetstream.RawStreamMsg) {
		if strings.HasPrefix(m.Subject, ns+".outbox.") {
			copies[m.Header.Get("Esjet-Command-Id")]++
		}
	})
	return recorded, copies, ok
}

// assertExactlyOnce waits until every recorded command is in OUTBOX and
// fails if any is missing or stored twice.
func assertExactlyOnce(t *testing.T, url, ns string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		recorded, copies, ok := commandCopies(t, url, ns)
		if !ok {
			if time.Now().After(deadline) {
				t.Fatal("the streams could not be read for 30s")
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		missing := 0
		for _, id := range recorded {
			if copies[id] == 0 {
				missing++
			}
		}
		for id, n := range copies {
			if n > 1 {
				t.Fatalf("command %s is in OUTBOX %d times", id, n)
			}
		}
		if missing == 0 {
			if len(copies) != len(recorded) {
				t.Fatalf("OUTBOX holds %d commands, the log recorded %d", len(copies), len(recorded))
			}
			reconcileNoDrift(t, url)
			return len(recorded)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d recorded commands never reached OUTBOX", missing, len(recorded))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func requestTrip(t *testing.T, n *node, id string) (int, []byte) {
	t.Helper()
	return post(t, "http://"+n.httpAddr+"/v1/trip/"+id+"/request_trip", tripRequest, map[string]string{"Idempotency-Key": id + "-req"})
}

// TestCrashAfterAppendBeforeReply: the node dies right after a decision is
// stored, before it answers. After a restart the retried request returns
// the stored decision, and its command reaches OUTBOX exactly once.
func TestCrashAfterAppendBeforeReply(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := startNodeEnv(t, dir, append(noDemo, "ESJET_FAILPOINT=after-append"))
	req := newPostRequest(t, "http://"+n.httpAddr+"/v1/trip/c1/request_trip", tripRequest, map[string]string{"Idempotency-Key": "c1-req"})
	if resp, err := httpClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the node answered %d; the failpoint should have killed it first", resp.StatusCode)
	}
	n.crashed(t)

	n = startNodeEnv(t, dir, noDemo)
	code, body := requestTrip(t, n, "c1")
	var res cmdResult
	_ = json.Unmarshal(body, &res)
	if code != 200 || !res.Replayed || res.Version != 1 {
		t.Fatalf("retry after the crash: %d %s; want the stored decision, replayed", code, body)
	}
	if got := assertExactlyOnce(t, n.natsURL, "demo"); got != 1 {
		t.Fatalf("%d commands recorded, want 1", got)
	}
	n.stop(t, syscall.SIGTERM)
}

// TestCrashBetweenRelayPublishAndAck: the relay dies after OUTBOX took a
// batch's commands and before it acked the decisions. After a restart the
// decisions come back, their commands are dropped as duplicates: each
// command is in OUTBOX once.
func TestCrashBetweenRelayPublishAndAck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := startNodeEnv(t, dir, append(noDemo, "ESJET_FAILPOINT=relay-after-publish"))
	// The relay publishes lock_budget, then the process dies — possibly
	// before this request is even answered: the answer does not matter.
	if resp, err := httpClient.Do(newPostRequest(t, "http://"+n.httpAddr+"/v1/trip/r1/request_trip", tripRequest, map[string]string{"Idempotency-Key": "r1-req"})); err == nil {
		resp.Body.Close()
	}
	n.crashed(t)

	n = startNodeEnv(t, dir, noDemo)
	for i := 2; i <= 5; i++ {
		if code, body := requestTrip(t, n, fmt.Sprintf("r%d", i)); code != 200 {
			t.Fatalf("request %d: %d %s", i, code, body)
		}
	}
	if got := assertExactlyOnce(t, n.natsURL, "demo"); got != 5 {
		t.Fatalf("%d commands recorded, want 5", got)
	}
	n.stop(t, syscall.SIGTERM)
}

// TestKill9MidLoad kills the whole node while clients are sending: after a
// restart, every command the log recorded is in OUTBOX exactly once.
func TestKill9MidLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Decisions the killed relay held come back after the relay's ack_wait:
	// keep it short so the test does not wait the default.
	env := append(noDemo, "ESJET_OUTBOX_ACK_WAIT=2s")
	n := startNodeEnv(t, dir, env)
	var mu sync.Mutex
	acked := map[string]bool{} // only the requests the node answered 200
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("k%d-%d", w, i)
				resp, err := httpClient.Do(newPostRequest(t, "http://"+n.httpAddr+"/v1/trip/"+id+"/request_trip", tripRequest, nil))
				if err != nil {
					return // the node is gone
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					mu.Lock()
					acked[id] = true
					mu.Unlock()
				}
			}
		})
	}
	natstest.Eventually(t, 30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 200 })
	n.kill9(t)
	close(stop)
	wg.Wait()

	n = startNodeEnv(t, dir, env)
	got := assertExactlyOnce(t, n.natsURL, "demo")
	// Every acknowledged trip is in the log exactly once: nothing the
	// client was told is stored was lost.
	if lost, double := clCheckLog(t, n, acked); lost != 0 || double != 0 {
		t.Fatalf("%d acknowledged trips lost, %d stored twice", lost, double)
	}
	t.Logf("%d requests acknowledged before kill -9, all in the log once; %d commands recorded, each in OUTBOX once", len(acked), got)
	n.stop(t, syscall.SIGTERM)
}

// TestTwoNodesOneActiveRelayAndFailover: two node processes share a
// namespace on one NATS server; only one relays; when it is killed with
// SIGKILL the other takes over within failover_after, and no command is
// relayed twice.
func TestTwoNodesOneActiveRelayAndFailover(t *testing.T) {
	t.Parallel()
	srv := natstest.RunServer(t)
	failover := append(noDemo, "ESJET_OUTBOX_FAILOVER_AFTER=2s")
	first := startNodeEnv(t, t.TempDir(), failover, "--url", srv.ClientURL())
	for i := range 5 {
		if code, body := requestTrip(t, first, fmt.Sprintf("t%d", i)); code != 200 {
			t.Fatalf("request: %d %s", code, body)
		}
	}
	assertExactlyOnce(t, srv.ClientURL(), "demo") // the first node's relay is the pinned one
	second := startNodeEnv(t, t.TempDir(), failover, "--url", srv.ClientURL())
	for i := 5; i < 10; i++ {
		if code, body := requestTrip(t, second, fmt.Sprintf("t%d", i)); code != 200 {
			t.Fatalf("request: %d %s", code, body)
		}
	}
	assertExactlyOnce(t, srv.ClientURL(), "demo")
	if strings.Contains(second.stderr.String(), "relay stopped") {
		t.Fatal("the standby relay stopped")
	}
	first.kill9(t)
	start := time.Now()
	for i := 10; i < 20; i++ {
		if code, body := requestTrip(t, second, fmt.Sprintf("t%d", i)); code != 200 {
			t.Fatalf("request: %d %s", code, body)
		}
	}
	if got := assertExactlyOnce(t, srv.ClientURL(), "demo"); got != 20 {
		t.Fatalf("%d commands, want 20", got)
	}
	t.Logf("the standby relayed the last 10 commands %v after the active node was killed", time.Since(start).Round(10*time.Millisecond))
	second.stop(t, syscall.SIGTERM)
}

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Scenario 6: the store fills up. JetStream's own limit (the embedded
// server's max_store) stands in for a full disk, which works anywhere; the
// variant on a real, tiny filesystem is TestDiskFullOnLoopFilesystem
// (build tag loopfs, root only). Appends must fail with a clear error,
// nothing acknowledged may be lost, and the node must recover once space
// returns (here: restarted with a larger limit on the same store).

// dfAnswer is one request_trip answer.
type dfAnswer struct {
	status int
	code   string
	msg    string
	err    error
}

func dfSend(n *node, id string) dfAnswer {
	req, err := http.NewRequest(http.MethodPost, "http://"+n.httpAddr+"/v1/trip/"+id+"/request_trip", strings.NewReader(tripRequest))
	if err != nil {
		return dfAnswer{err: err}
	}
	req.Header.Set("Idempotency-Key", id+"-req")
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return dfAnswer{err: err}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return dfAnswer{status: resp.StatusCode, code: e.Error.Code, msg: e.Error.Message}
}

// dfFill sends new trips until the node refuses several in a row; it
// returns the acknowledged trips, every trip sent, and the refusals.
func dfFill(t *testing.T, n *node, prefix string, limit int) (acked map[string]bool, sent []string, refused []dfAnswer) {
	t.Helper()
	acked = map[string]bool{}
	for i := range limit {
		id := fmt.Sprintf("%s-%d", prefix, i)
		sent = append(sent, id)
		a := dfSend(n, id)
		if a.status == http.StatusOK {
			acked[id] = true
			refused = refused[:0]
			continue
		}
		refused = append(refused, a)
		if len(refused) >= 5 {
			return acked, sent, refused
		}
	}
	t.Fatalf("the store never filled: %d trips acknowledged of %d sent", len(acked), len(sent))
	return nil, nil, nil
}

// dfCheckRefusal requires a refusal to say what happened: 507, code
// storage_full, a message naming storage and the setting to change.
func dfCheckRefusal(t *testing.T, refused []dfAnswer) {
	t.Helper()
	for _, a := range refused {
		if a.err != nil {
			t.Errorf("append on a full store: transport error %v, want an API error", a.err)
			continue
		}
		if a.status != http.StatusInsufficientStorage || a.code != "storage_full" ||
			!strings.Contains(a.msg, "storage") || !strings.Contains(a.msg, "max_store") {
			t.Errorf("append on a full store answered %d %q %q; want 507 storage_full naming storage and max_store", a.status, a.code, a.msg)
		}
	}
}

func dfScenarioLine(t *testing.T, name string, commands, acked, lost, double int, orphans uint64, recovery time.Duration) {
	t.Helper()
	line := fmt.Sprintf("scenario=%s commands=%d acked=%d lost=%d double_applied=%d orphans=%d drift=0 redeliveries=- dup_suppressed=- recovery_ms=%d",
		name, commands, acked, lost, double, orphans, recovery.Milliseconds())
	t.Log(line)
	fmt.Println(line)
}

// dfRecover sends until an append succeeds again (a retried trip that was
// refused, then new ones) and returns how long that took from since.
func dfRecover(t *testing.T, n *node, retry string, since time.Time, acked map[string]bool) time.Duration {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := dfSend(n, retry)
		if a.status == http.StatusOK {
			acked[retry] = true
			return time.Since(since)
		}
		if time.Now().After(deadline) {
			t.Fatalf("appends still fail 30s after space returned: %d %s %s %v", a.status, a.code, a.msg, a.err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dfAfterFull is the part both variants share once the store refused
// writes: reads and idempotent replays still answer, the node stops
// cleanly, restarts with room (restart), recovers, and the invariants
// hold. It prints the scenario line.
func dfAfterFull(t *testing.T, name string, n *node, acked map[string]bool, sent []string, refused []dfAnswer, restart func() *node) {
	t.Helper()
	dfCheckRefusal(t, refused)
	t.Logf("%d trips acknowledged, then refused: %d %s: %s", len(acked), refused[0].status, refused[0].code, refused[0].msg)
	// A full store still serves reads, and the retry of an acknowledged
	// request gets its first answer.
	var some string
	for id := range acked {
		some = id
		break
	}
	if a := dfSend(n, some); a.status != http.StatusOK {
		t.Errorf("retry of acknowledged %s on a full store: %d %s %s", some, a.status, a.code, a.msg)
	}
	if evs := tripEvents(t, n, some); countType(evs, "trip_requested") != 1 {
		t.Errorf("trip %s: %v", some, eventTypes(evs))
	}
	n.stop(t, syscall.SIGTERM)

	spaceBack := time.Now()
	n = restart()
	recovery := dfRecover(t, n, sent[len(sent)-1], spaceBack, acked)
	t.Logf("appends succeed again %s after space returned (node restart included)", recovery.Round(time.Millisecond))
	// The client retries every refused trip with its key.
	for _, id := range sent {
		if !acked[id] {
			if a := dfSend(n, id); a.status != http.StatusOK {
				t.Fatalf("retry of refused trip %s after recovery: %d %s %s %v", id, a.status, a.code, a.msg, a.err)
			}
			acked[id] = true
		}
	}
	for i := range 20 {
		id := fmt.Sprintf("%s-after-%d", name, i)
		sent = append(sent, id)
		if a := dfSend(n, id); a.status != http.StatusOK {
			t.Fatalf("append after recovery: %d %s %s %v", a.status, a.code, a.msg, a.err)
		}
		acked[id] = true
	}
	lost, double := clCheckLog(t, n, acked)
	recorded := assertExactlyOnce(t, n.natsURL, "demo")
	tot, _ := reconcileNoDrift(t, n.natsURL)
	if recorded < len(acked) {
		t.Errorf("%d commands recorded for %d acknowledged trips", recorded, len(acked))
	}
	dfScenarioLine(t, name, len(sent), len(acked), lost, double, tot.Orphans, recovery)
	n.stop(t, syscall.SIGTERM)
}

func TestDiskFullRefusesThenRecovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// JetStream counts stored message bytes against max_store (the streams
	// reserve nothing: max_bytes -1); 1MiB holds a few hundred trips.
	env := append([]string{"ESJET_OUTBOX_ACK_WAIT=2s"}, noDemo...)
	n := startNodeEnv(t, dir, append(env, "ESJET_NATS_EMBEDDED_MAX_STORE=1MiB"))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node log:\n%s", n.stderr.String())
		}
	})
	acked, sent, refused := dfFill(t, n, "df", 5000)
	dfAfterFull(t, "disk-full", n, acked, sent, refused, func() *node {
		n = startNodeEnv(t, dir, append(env, "ESJET_NATS_EMBEDDED_MAX_STORE=64MiB"))
		return n
	})
}

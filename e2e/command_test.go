package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const tripRequest = `{"traveler":"ada","destination":"Lisbon","budget":100000,"flight_price":40000,"hotel_price":30000}`

type cmdResult struct {
	Version    uint64 `json:"version"`
	DecisionID string `json:"decision_id"`
	Seq        uint64 `json:"seq"`
	Replayed   bool   `json:"replayed"`
	Events     []struct {
		Type string `json:"type"`
	} `json:"events"`
	Commands []struct {
		ID   string `json:"id"`
		Kind string `json:"kind"`
	} `json:"commands"`
}

// httpClient bounds every request: a crashed node must not hang a test.
var httpClient = &http.Client{Timeout: 30 * time.Second}

func newPostRequest(t *testing.T, url, body string, hdr map[string]string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return req
}

func post(t *testing.T, url, body string, hdr map[string]string) (int, []byte) {
	t.Helper()
	resp, err := httpClient.Do(newPostRequest(t, url, body, hdr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestTripThroughTheCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := startNodeEnv(t, dir, noDemo)
	at := []string{"--listen", n.natsListen}

	out := runCLI(t, dir, append([]string{"send", "trip", "t1", "request_trip", tripRequest, "--key", "k1"}, at...)...)
	var res cmdResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("send output: %v\n%s", err, out)
	}
	if res.Version != 1 || len(res.Commands) != 1 || res.Commands[0].Kind != "lock_budget" || res.Commands[0].ID != "trip:t1:1:0" {
		t.Fatalf("send result = %+v", res)
	}
	history := runCLI(t, dir, append([]string{"events", "trip", "t1"}, at...)...)
	for _, want := range []string{"trip_requested", "trip:t1:1:0", "lock_budget", res.DecisionID} {
		if !strings.Contains(history, want) {
			t.Errorf("events output lacks %q:\n%s", want, history)
		}
	}
	state := runCLI(t, dir, append([]string{"state", "trip", "t1"}, at...)...)
	if !strings.Contains(state, `"status": "requested"`) {
		t.Errorf("state output:\n%s", state)
	}
	// Errors come back as the API's status and code, exit 1.
	_, stderr, code := runCLIFail(t, dir, append([]string{"send", "trip", "t1", "request_trip", tripRequest}, at...)...)
	if code != 1 || !strings.Contains(stderr, "422 already_requested") {
		t.Errorf("duplicate request: exit %d, stderr %s", code, stderr)
	}
	_, stderr, code = runCLIFail(t, dir, append([]string{"send", "boat", "b1", "sail"}, at...)...)
	if code != 1 || !strings.Contains(stderr, "404 unknown_type") || !strings.Contains(stderr, "trip") {
		t.Errorf("unknown type: exit %d, stderr %s", code, stderr)
	}
	_, stderr, code = runCLIFail(t, dir, append([]string{"send", "trip", "t1", "add_note", "{not json"}, at...)...)
	if code != 1 || !strings.Contains(stderr, "not valid JSON") {
		t.Errorf("bad JSON: exit %d, stderr %s", code, stderr)
	}
	n.stop(t, syscall.SIGTERM)
}

func TestIdempotencyKeyHoldsAcrossARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := startNodeEnv(t, dir, noDemo)
	url := "http://" + n.httpAddr + "/v1/trip/t1/request_trip"
	key := map[string]string{"Idempotency-Key": "trip-t1-request"}
	code, body := post(t, url, tripRequest, key)
	if code != 200 {
		t.Fatalf("first request: %d %s", code, body)
	}
	var first cmdResult
	_ = json.Unmarshal(body, &first)
	n.stop(t, syscall.SIGTERM)

	n = startNodeEnv(t, dir, noDemo) // empty cache: the answer must come from the log
	url = "http://" + n.httpAddr + "/v1/trip/t1/request_trip"
	code, body = post(t, url, tripRequest, key)
	var again cmdResult
	_ = json.Unmarshal(body, &again)
	if code != 200 || !again.Replayed || again.DecisionID != first.DecisionID || again.Seq != first.Seq {
		t.Fatalf("retry after restart: %d %+v, want the first result %+v", code, again, first)
	}
	code, body = post(t, url, strings.Replace(tripRequest, "ada", "bob", 1), key)
	if code != 409 || !bytes.Contains(body, []byte("idempotency_key_reused")) {
		t.Fatalf("same key, other body: %d %s", code, body)
	}
	out := runCLI(t, dir, "streams", "--listen", n.natsListen, "--json")
	if !strings.Contains(out, `"messages": 1`) {
		t.Fatalf("the retries wrote to the log:\n%s", out)
	}
	n.stop(t, syscall.SIGTERM)
}

// TestTwoNodeProcessesShareOneAggregate runs an embedded node and a second
// node process connected to it in external mode; 16 goroutines send to one
// trip through both: no update is lost and versions stay contiguous.
func TestTwoNodeProcessesShareOneAggregate(t *testing.T) {
	t.Parallel()
	a := startNodeEnv(t, t.TempDir(), noDemo)
	b := startNodeEnv(t, t.TempDir(), noDemo, "--url", a.natsURL)
	if code, body := post(t, "http://"+a.httpAddr+"/v1/trip/hot/request_trip", tripRequest, nil); code != 200 {
		t.Fatalf("request_trip: %d %s", code, body)
	}
	var ok, conflicts atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		node := []*node{a, b}[g%2]
		wg.Go(func() {
			for i := range 8 {
				code, body := post(t, "http://"+node.httpAddr+"/v1/trip/hot/add_note", fmt.Sprintf(`{"text":"g%d-%d"}`, g, i), nil)
				switch code {
				case 200:
					ok.Add(1)
				case 409:
					conflicts.Add(1)
				default:
					t.Errorf("add_note: %d %s", code, body)
					return
				}
			}
		})
	}
	wg.Wait()
	resp, err := http.Get("http://" + b.httpAddr + "/v1/trip/hot/events?limit=1000")
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Version uint64
		Events  []struct {
			Type    string
			Version uint64
		}
	}
	_ = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	notes := 0
	for i, e := range h.Events {
		if e.Version != uint64(i+1) {
			t.Fatalf("event %d has version %d: not contiguous", i, e.Version)
		}
		if e.Type == "note_added" {
			notes++
		}
	}
	if int64(notes) != ok.Load() {
		t.Fatalf("%d notes stored, %d acknowledged (%d conflicts): lost or phantom update", notes, ok.Load(), conflicts.Load())
	}
	t.Logf("%d notes through two processes, %d gave up with 409", ok.Load(), conflicts.Load())
	b.stop(t, syscall.SIGTERM)
	a.stop(t, syscall.SIGTERM)
}

package node_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/esjettest"
	"github.com/esjet/esjet/internal/natstest"
)

func readyz(t *testing.T, addr string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("readyz body %s: %v", b, err)
	}
	return resp.StatusCode, body
}

// TestReadyzChecksTheNamespacesStreams deletes a stream under a running
// node: /readyz must notice, not only that JetStream answers.
func TestReadyzChecksTheNamespacesStreams(t *testing.T) {
	for _, stream := range []string{"TEST_OUTBOX", "KV_test_receipts"} {
		t.Run(stream, func(t *testing.T) {
			n := esjettest.Start(t, trip.Definition())
			if code, body := readyz(t, n.HTTPAddr()); code != http.StatusOK || body["status"] != "ready" {
				t.Fatalf("fresh node: readyz %d %v", code, body)
			}
			nc, err := nats.Connect(n.NATSURL())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			if err := js.DeleteStream(t.Context(), stream); err != nil {
				t.Fatal(err)
			}
			var code int
			var body map[string]any
			natstest.Eventually(t, 10*time.Second, func() bool {
				code, body = readyz(t, n.HTTPAddr())
				return code == http.StatusServiceUnavailable
			})
			if msg, _ := body["error"].(string); body["status"] != "unavailable" || !strings.Contains(msg, "namespace test is missing "+stream) {
				t.Errorf("readyz after deleting %s: %d %v", stream, code, body)
			}
		})
	}
}

// Issue 32: readiness says how many commands across the fleet wait for a
// worker that understands their payload schema (the deferral records in
// the workers' bucket), and stays ready: the node serves everything else.
func TestReadyzCountsTheCommandsWaitingForANewerWorker(t *testing.T) {
	n := esjettest.Start(t, trip.Definition())
	nc, err := nats.Connect(n.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(t.Context(), "test_workers")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"defer.book_hotel.trip.t1.2.1", "defer.book_hotel.trip.t2.2.1", "pause.x"} {
		if _, err := kv.Put(t.Context(), key, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	var code int
	var body map[string]any
	natstest.Eventually(t, 10*time.Second, func() bool {
		code, body = readyz(t, n.HTTPAddr())
		return body["waiting_for_newer_worker"] != nil
	})
	w, _ := body["waiting_for_newer_worker"].(map[string]any)
	kinds, _ := w["kinds"].(map[string]any)
	if code != http.StatusOK || body["status"] != "ready" || w["commands"] != 2.0 || kinds["book_hotel"] != 2.0 ||
		!strings.Contains(w["note"].(string), "2 command(s) waiting for a newer worker") {
		t.Fatalf("readyz %d %v", code, body)
	}
}

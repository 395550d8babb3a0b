package node

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/projection"
	"github.com/esjet/esjet/internal/wire"
)

// TestProjectionsThatCannotStartAreTriedAgain: a node whose read models
// cannot start (here their control bucket cannot be made: another stream
// holds its subjects; on a cluster formed a moment ago, an R3 bucket that
// does not answer in time) serves commands, says in /readyz that the
// read models wait, and starts them once they can start — it used to log
// one error and run without them until restarted.
func TestProjectionsThatCannotStartAreTriedAgain(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	blocker := jetstream.StreamConfig{Name: "BLOCKER_" + ns, Subjects: []string{wire.KVSubject(wire.ProjectionsBucket(ns), ">")}}
	if _, err := js.CreateStream(t.Context(), blocker); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, ns)
	cfg.NATS.Mode = config.ModeExternal
	cfg.NATS.External.URLs = []string{s.ClientURL()}
	counts := projection.Definition{Name: "counts", Handle: func(ctx context.Context, tx *projection.Tx, e projection.Event) error {
		return tx.Put(e.AggregateID, 1)
	}}
	n := startTestNode(t, cfg, Options{Projections: []projection.Definition{counts}})

	ready := func() (int, map[string]any) {
		rec := httptest.NewRecorder()
		n.handleReady(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		return rec.Code, body
	}
	code, body := ready()
	if msg, _ := body["projections"].(string); code != http.StatusOK || !strings.Contains(msg, "not started yet") {
		t.Fatalf("readyz while the read models cannot start: %d %v, want 200 saying they wait", code, body)
	}

	if err := js.DeleteStream(t.Context(), blocker.Name); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, func() bool {
		st, err := n.Views().Status(t.Context(), "counts")
		return err == nil && len(st.Parts) == 1 && st.Parts[0].Owner != ""
	})
	if code, body := ready(); code != http.StatusOK || body["projections"] != nil {
		t.Fatalf("readyz once the read models run: %d %v", code, body)
	}
}

package node

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/natstest"
)

// TestAComponentThatStopsTakesReadinessDownAtOnce: a relay or worker whose
// Run ends with an error while the node runs (the relay died at start on a
// server without priority groups, and nothing said so until shutdown) is
// logged at ERROR when it happens and makes /readyz answer 503 naming it.
func TestAComponentThatStopsTakesReadinessDownAtOnce(t *testing.T) {
	cfg := config.Default()
	cfg.Namespace = "health"
	cfg.NATS.Embedded.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.NATS.Embedded.Listen = config.ListenNone
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Demo.Services = false
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var logs natstest.Buffer
	n, err := Start(t.Context(), cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = n.Close(ctx)
	})
	readyz := func() (int, map[string]any) {
		resp, err := http.Get("http://" + n.HTTPAddr() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("fresh node: readyz %d %v", code, body)
	}

	// What the relay's goroutine does when Run returns on its own.
	ctx := t.Context()
	if err := n.watch(ctx, "relay", errors.New("consume HEALTH_EVENTS: priority group is not supported")); err == nil {
		t.Fatal("watch swallowed the error")
	}
	code, body := readyz()
	if msg, _ := body["error"].(string); code != http.StatusServiceUnavailable || !strings.Contains(msg, "relay stopped") || !strings.Contains(msg, "priority group is not supported") {
		t.Errorf("after the relay stopped: readyz %d %v, want 503 naming the relay and its error", code, body)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "component_name=relay") {
		t.Errorf("no ERROR line naming the relay when it stopped:\n%s", logs.String())
	}

	// A component stopped by the node (its ctx ended) is not a failure.
	done, cancel := context.WithCancel(ctx)
	cancel()
	before := strings.Count(logs.String(), "level=ERROR")
	_ = n.watch(done, "worker x", errors.New("stopped"))
	if strings.Count(logs.String(), "level=ERROR") != before {
		t.Errorf("a component stopped on purpose was logged as a failure:\n%s", logs.String())
	}
}

package projection

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// schemaTooNew is what an older build's upcasters say of an event a newer
// build wrote (package aggregate's SchemaError, here without it).
type schemaTooNew struct{ schema int }

func (e schemaTooNew) Error() string {
	return fmt.Sprintf("schema version %d, newer than this node knows (1)", e.schema)
}
func (schemaTooNew) TooNew() bool { return true }

// TestAPartitionStandsDownBeforeANewerBuildsEvent: a view of an older
// build that reaches an event a newer build wrote stores everything before
// it, hands the partition over (its lease says so, the status is red with
// the reason, it logs once) instead of restarting on the spot, and stays
// away; a node of the newer build takes it over at once and reads on.
func TestAPartitionStandsDownBeforeANewerBuildsEvent(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	older, err := streams.Open(ctx, e.js, e.ns, streams.Config{Upcast: func(_ string, ev streams.Event) (streams.Event, error) {
		if ev.Schema > 1 {
			return ev, schemaTooNew{ev.Schema}
		}
		return ev, nil
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.append(t, "doc", "a", "made")
	e.append(t, "doc", "b", "made")
	d := streams.Decision{ID: uuid.Must(uuid.NewV7()).String(), AggregateType: "doc", AggregateID: "c",
		Events: []streams.Event{{Type: "made", Schema: 2, Data: json.RawMessage(`{"n":1}`)}}}
	if _, err := e.log.Append(ctx, d, streams.Position{}); err != nil {
		t.Fatal(err)
	}
	e.append(t, "doc", "d", "made")

	const view = "made_count"
	var logs natstest.Buffer
	r, err := NewRunner(ctx, e.js, older, []Definition{counter(view)}, testConfig(), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })

	views := NewViews(e.js, e.ns, testConfig().LeaseTTL)
	var st Status
	eventually(t, "the older build's view stores a and b and stands down before c", func() bool {
		st, err = views.Status(ctx, view)
		return err == nil && len(st.Parts) == 1 && st.Parts[0].State == StateNewerBuild &&
			e.count(t, view, "a") == 1 && e.count(t, view, "b") == 1
	})
	if st.Health != Red || !strings.Contains(st.Reason, "newer build") {
		t.Fatalf("status of a view stopped before a newer build's event: %s %q; want red, saying why", st.Health, st.Reason)
	}
	// Away for a while, not retrying on the spot: ten heartbeats later it
	// has said so once and restarted nothing.
	time.Sleep(10 * testConfig().Heartbeat)
	if n := strings.Count(logs.String(), "stands down"); n != 1 || strings.Contains(logs.String(), "restarts from its checkpoint") {
		t.Fatalf("%d stand-down lines, want 1, and no restarts:\n%s", n, logs.String())
	}
	if e.count(t, view, "c") != 0 || e.count(t, view, "d") != 0 {
		t.Fatal("the older build's view went past the newer event")
	}

	// A node of the newer build (its upcasters know schema 2) takes the
	// partition over at once and reads on.
	e.run(t, testConfig(), counter(view))
	eventually(t, "the newer build's node applies c and d", func() bool {
		return e.count(t, view, "c") == 1 && e.count(t, view, "d") == 1
	})
	if e.count(t, view, "a") != 1 || e.count(t, view, "b") != 1 {
		t.Fatal("an event before the handover was applied twice")
	}
}

package node

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// TestHubOutcomeNotAppliedYetCarriesItsIds: a hub's outcome the site cannot
// apply yet (here: its context is over) is logged with the command's id,
// the decision that issued it and its trace, as every line about a
// command is (TestCommandLogLinesCarryTheirIds).
func TestHubOutcomeNotAppliedYetCarriesItsIds(t *testing.T) {
	n := startTestNode(t, testConfig(t, "hublog"), Options{Aggregates: []*aggregate.Definition{orderDefinition()}})
	js := n.JetStream()
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "HUBLOG_TEST", Subjects: []string{"hublog_test.outcome"}}); err != nil {
		t.Fatal(err)
	}
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	r := wire.Report{AggregateType: "order", AggregateID: "o1", Kind: "charge_done", Payload: []byte(`{"command_id":"order:o1:1:0"}`),
		IdempotencyKey: "order:o1:1:0:done", CausationID: "order:o1:1:0", DecisionID: "0193d7a6-0000-7000-8000-000000000001",
		TraceParent: "00-" + trace + "-00f067aa0ba902b7-01"}
	body, _ := json.Marshal(r)
	if _, err := js.Publish(t.Context(), "hublog_test.outcome", body); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateConsumer(t.Context(), "HUBLOG_TEST", jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	receipts, err := js.KeyValue(t.Context(), streams.NamesFor("hublog").Receipts)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	over, cancel := context.WithCancel(t.Context())
	cancel()
	n.applyOutcome(over, logger, receipts, msg)
	var rec map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(line, "hub outcome not applied yet") {
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	if rec == nil {
		t.Fatalf("no 'hub outcome not applied yet' line:\n%s", logs.String())
	}
	if rec["command_id"] != r.CausationID || rec["decision_id"] != r.DecisionID || rec["trace_id"] != trace {
		t.Errorf("the line's ids: command %v, decision %v, trace %v; want %s, %s, %s", rec["command_id"], rec["decision_id"], rec["trace_id"], r.CausationID, r.DecisionID, trace)
	}
}

package node_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/demo/services"
	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/wire"
)

// seen records the traceparent each target request carried, by
// idempotency key (the command id).
type seen struct {
	mu sync.Mutex
	tp map[string]string
}

func (s *seen) add(key, tp string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tp[key] = tp
}

func (s *seen) get(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tp[key]
}

// TestTheTripSagaIsOneTrace runs a trip to confirmation and one to
// compensation, each sent with the client's traceparent, and reads the
// spans: each saga is one connected trace — the command, every relay hop,
// worker, target call and outcome decision — under the client's span, and
// the NATS and HTTP targets received the call span's traceparent.
func TestTheTripSagaIsOneTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	httpSeen := &seen{tp: map[string]string{}}
	release := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpSeen.add(r.Header.Get("Idempotency-Key"), r.Header.Get("traceparent"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer release.Close()
	n := tripNode(t, tripOptions{spans: sdktrace.NewSimpleSpanProcessor(exp),
		routes: map[string]config.Worker{trip.KindReleaseBudget: {Target: config.TargetHTTP, URL: release.URL}},
		edit:   func(c *config.Config) { c.NATS.Embedded.Listen = "127.0.0.1:0" }})
	nc, err := nats.Connect(n.Broker().ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	natsSeen := &seen{tp: map[string]string{}}
	spy, err := nc.Subscribe("demo.svc.>", func(m *nats.Msg) {
		natsSeen.add(m.Header.Get("Idempotency-Key"), m.Header.Get("traceparent"))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	const (
		traceA  = "4bf92f3577b34da6a3ce929d0e0e4736"
		traceB  = "0af7651916cd43dd8448eb211c80319c"
		client  = "00f067aa0ba902b7"
		clientB = "b7ad6b7169203331"
	)
	post(t, n, "/v1/trip/t1/request_trip", lisbon, http.Header{"Traceparent": {"00-" + traceA + "-" + client + "-01"}}, 200)
	post(t, n, "/v1/trip/t2/request_trip", atlantis, http.Header{"Traceparent": {"00-" + traceB + "-" + clientB + "-01"}}, 200)

	wantA := []string{"esjet.command trip.request_trip", "esjet.relay lock_budget", "esjet.worker lock_budget", "esjet.call lock_budget",
		"esjet.outcome trip.lock_budget_done", "esjet.relay book_flight", "esjet.worker book_flight", "esjet.call book_flight",
		"esjet.relay book_hotel", "esjet.worker book_hotel", "esjet.call book_hotel",
		"esjet.outcome trip.book_flight_done", "esjet.outcome trip.book_hotel_done"}
	wantB := []string{"esjet.command trip.request_trip", "esjet.outcome trip.lock_budget_done", "esjet.call book_flight",
		"esjet.outcome trip.book_flight_failed", "esjet.relay release_budget", "esjet.worker release_budget", "esjet.call release_budget",
		"esjet.outcome trip.release_budget_done", "esjet.relay cancel_hotel", "esjet.call cancel_hotel", "esjet.outcome trip.cancel_hotel_done"}
	var traces map[string]tracetest.SpanStubs
	natstest.Eventually(t, 30*time.Second, func() bool {
		traces = map[string]tracetest.SpanStubs{}
		for _, s := range exp.GetSpans() {
			id := s.SpanContext.TraceID().String()
			traces[id] = append(traces[id], s)
		}
		// A span is exported when it ends, and a worker's ends after the
		// outcome decision it reports: wait until no span misses its parent.
		return hasAll(traces[traceA], wantA) && hasAll(traces[traceB], wantB) &&
			connected(traces[traceA], client) && connected(traces[traceB], clientB) &&
			tripStatus(n, "t1") == trip.StatusConfirmed && tripStatus(n, "t2") == trip.StatusCancelled
	})
	if len(traces) != 2 {
		for id, spans := range traces {
			t.Logf("trace %s: %v", id, names(spans))
		}
		t.Fatalf("%d traces, want 2: one per saga", len(traces))
	}
	for id, parent := range map[string]string{traceA: client, traceB: clientB} {
		spans := traces[id]
		ids := map[string]bool{parent: true}
		for _, s := range spans {
			ids[s.SpanContext.SpanID().String()] = true
		}
		for _, s := range spans {
			if !ids[s.Parent.SpanID().String()] {
				t.Errorf("trace %s: span %q has parent %s, which is neither the client's span nor one of the saga's", id, s.Name, s.Parent.SpanID())
			}
		}
	}
	// The chain: the outcome decision is the worker's child, and the
	// commands it issues are relayed under it.
	a := traces[traceA]
	parentOf := func(name string) string { return named(a, name).Parent.SpanID().String() }
	idOf := func(name string) string { return named(a, name).SpanContext.SpanID().String() }
	if parentOf("esjet.command trip.request_trip") != client ||
		parentOf("esjet.relay lock_budget") != idOf("esjet.command trip.request_trip") ||
		parentOf("esjet.worker lock_budget") != idOf("esjet.relay lock_budget") ||
		parentOf("esjet.call lock_budget") != idOf("esjet.worker lock_budget") ||
		parentOf("esjet.outcome trip.lock_budget_done") != idOf("esjet.worker lock_budget") ||
		parentOf("esjet.relay book_flight") != idOf("esjet.outcome trip.lock_budget_done") {
		t.Errorf("trace %s is not the chain command → relay → worker → call, worker → outcome → relay: %v", traceA, names(a))
	}
	// The targets got the call span's traceparent. The spy's copy of the
	// request is handled on its own goroutine: on a busy machine the saga's
	// spans can be complete before it has seen it.
	natstest.Eventually(t, 10*time.Second, func() bool { return natsSeen.get("trip:t1:2:0") != "" })
	if got, want := natsSeen.get("trip:t1:2:0"), "00-"+traceA+"-"+idOf("esjet.call book_flight")+"-01"; got != want {
		t.Errorf("NATS target book_flight got traceparent %q, want %q (seen %v)", got, want, natsSeen.tp)
	}
	b := traces[traceB]
	if got, want := httpSeen.get(telemetryCommandID(b, "esjet.call release_budget")), "00-"+traceB+"-"+named(b, "esjet.call release_budget").SpanContext.SpanID().String()+"-01"; got != want {
		t.Errorf("HTTP target release_budget got traceparent %q, want %q", got, want)
	}
}

// connected says whether every span's parent is root (the client's span)
// or another of spans.
func connected(spans tracetest.SpanStubs, root string) bool {
	ids := map[string]bool{root: true}
	for _, s := range spans {
		ids[s.SpanContext.SpanID().String()] = true
	}
	for _, s := range spans {
		if !ids[s.Parent.SpanID().String()] {
			return false
		}
	}
	return true
}

func hasAll(spans tracetest.SpanStubs, want []string) bool {
	for _, w := range want {
		if named(spans, w).Name == "" {
			return false
		}
	}
	return true
}

func named(spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	return tracetest.SpanStub{}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// telemetryCommandID is the command id of the worker span that is the
// named call span's parent.
func telemetryCommandID(spans tracetest.SpanStubs, call string) string {
	parent := named(spans, call).Parent.SpanID()
	for _, s := range spans {
		if s.SpanContext.SpanID() == parent {
			for _, a := range s.Attributes {
				if a.Key == "esjet.command.id" {
					return a.Value.AsString()
				}
			}
		}
	}
	return ""
}

// TestCommandLogLinesCarryTheirIds runs a trip whose hotel booking fails
// once (a retry) and one to Atlantis (a dead letter) with every log line
// kept: each line naming a command also names its decision and its trace —
// the trace of the request that started the saga.
func TestCommandLogLinesCarryTheirIds(t *testing.T) {
	var logs natstest.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	n := tripNode(t, tripOptions{logger: logger,
		services: services.Options{Fail: map[string]services.Mode{services.Hotels: {Kind: services.Transient, Count: 1}}}})
	const traceA, traceB = "4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c"
	post(t, n, "/v1/trip/t1/request_trip", lisbon, http.Header{"Traceparent": {"00-" + traceA + "-00f067aa0ba902b7-01"}}, 200)
	post(t, n, "/v1/trip/t2/request_trip", atlantis, http.Header{"Traceparent": {"00-" + traceB + "-b7ad6b7169203331-01"}}, 200)
	natstest.Eventually(t, 30*time.Second, func() bool {
		return tripStatus(n, "t1") == trip.StatusConfirmed && tripStatus(n, "t2") == trip.StatusCancelled &&
			strings.Contains(logs.String(), `"msg":"retrying"`) && strings.Contains(logs.String(), `"msg":"dead-lettered"`)
	})
	// An operator discards t2's dead letter through the node: the node's
	// "dlq action" line names the command's decision and trace too.
	dl, err := ops.OpenDLQ(n.JetStream(), "tel").Get(t.Context(), "trip:t2:2:0")
	if err != nil {
		t.Fatalf("t2's dead letter: %v", err)
	}
	m, err := n.Broker().Conn().Request(wire.ActionSubject("tel", "tester", ops.ActionDiscard), []byte(fmt.Sprintf(`{"seq":%d,"reason":"test"}`, dl.Seq)), 10*time.Second)
	if err != nil || !strings.Contains(string(m.Data), `"discarded"`) {
		t.Fatalf("discard t2's dead letter: %v %s", err, m.Data)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return strings.Contains(logs.String(), `"msg":"dlq action"`) })
	about := 0
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if _, ok := rec["command_id"]; !ok {
			continue
		}
		about++
		if rec["decision_id"] == nil || rec["decision_id"] == "" || (rec["trace_id"] != traceA && rec["trace_id"] != traceB) {
			t.Errorf("log line about a command without its decision id or the saga's trace id: %s", line)
		}
	}
	t.Logf("%d log lines about a command", about)
	if about < 2 {
		t.Fatalf("%d log lines about a command, want at least the retry and the dead letter:\n%s", about, logs.String())
	}
}

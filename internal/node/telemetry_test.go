package node_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/demo/services"
	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/node"
)

// tripOptions vary tripNode's node.
type tripOptions struct {
	spans    sdktrace.SpanProcessor
	routes   map[string]config.Worker // over the demo services' routes
	edit     func(*config.Config)
	logger   *slog.Logger
	services services.Options
	views    bool // run the trip's projections
}

// tripNode starts a node serving the trip with the demo services in
// process (every kind a NATS target on demo.svc.>), workers routing kinds
// the way esjet run does.
func tripNode(t *testing.T, o tripOptions) *node.Node {
	t.Helper()
	extra, edit := o.routes, o.edit
	cfg := config.Default()
	cfg.Namespace = "tel"
	cfg.NATS.Embedded.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.NATS.Embedded.Listen = config.ListenNone
	cfg.NATS.Embedded.Sync = config.SyncInterval
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Workers = map[string]config.Worker{}
	for kind, subject := range services.KindSubjects {
		cfg.Workers[kind] = config.Worker{Target: config.TargetNATS, Subject: subject, BackoffInitial: config.Duration(20 * time.Millisecond)}
	}
	for kind, w := range extra {
		cfg.Workers[kind] = w
	}
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	opts := node.Options{Aggregates: []*aggregate.Definition{trip.Definition()}, SpanProcessor: o.spans, Logger: o.logger}
	if o.views {
		opts.Projections = trip.Views()
	}
	n, err := node.Start(ctx, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := services.Start(ctx, n.Broker().Conn(), n.JetStream(), o.services, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.OnClose(func() { _ = svc.Close() })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return n
}

// post sends a command over HTTP and fails the test unless it is answered
// with status want.
func post(t *testing.T, n *node.Node, path, body string, header http.Header, want int) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+n.HTTPAddr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %d %s, want %d", path, resp.StatusCode, b, want)
	}
}

const (
	lisbon   = `{"traveler":"ada","destination":"Lisbon","budget":100000,"flight_price":40000,"hotel_price":30000}`
	atlantis = `{"traveler":"bob","destination":"Atlantis","budget":100000,"flight_price":40000,"hotel_price":30000}`
)

// tripStatus is the trip's status ("" when it cannot be read).
func tripStatus(n *node.Node, id string) string {
	st, err := n.Repository().Get(context.Background(), trip.Type, id)
	if err != nil {
		return ""
	}
	return st.Value.(trip.State).Status
}

// scrape reads url's metrics in the Prometheus text format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: not the Prometheus text format: %v", url, err)
	}
	return fams
}

// value is the sum of the family's samples whose labels include want (a
// histogram's count), and whether there was any.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	sum, found := 0.0, false
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, found
}

func l(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// TestMetricsMoveWithTheTripSaga runs one trip to confirmation and one to
// compensation and reads /metrics: the counts the saga must move moved,
// and the backlog settles to zero with the failed flight in the DLQ.
func TestMetricsMoveWithTheTripSaga(t *testing.T) {
	n := tripNode(t, tripOptions{views: true})
	url := "http://" + n.HTTPAddr() + "/metrics"
	before := scrape(t, url)
	if v, _ := value(before, "esjet_commands_total", nil); v != 0 {
		t.Fatalf("esjet_commands_total before any command = %v", v)
	}
	post(t, n, "/v1/trip/t1/request_trip", lisbon, nil, 200)
	post(t, n, "/v1/trip/t2/request_trip", atlantis, nil, 200)
	post(t, n, "/v1/nosuchtype/x1/go", `{}`, nil, 404)
	natstest.Eventually(t, 30*time.Second, func() bool {
		return tripStatus(n, "t1") == trip.StatusConfirmed && tripStatus(n, "t2") == trip.StatusCancelled
	})
	var fams map[string]*dto.MetricFamily
	natstest.Eventually(t, 30*time.Second, func() bool {
		fams = scrape(t, url)
		released, _ := value(fams, "esjet_commands_total", l("command", "release_budget_done", "result", "ok"))
		lag, _ := value(fams, "esjet_relay_lag_decisions", nil)
		pending, _ := value(fams, "esjet_outbox_pending", nil)
		inFlight, _ := value(fams, "esjet_outbox_in_flight", nil)
		viewLag, viewed := value(fams, "esjet_projection_lag_decisions", l("projection", trip.ViewTripsByStatus))
		return released == 1 && lag == 0 && pending == 0 && inFlight == 0 && viewed && viewLag == 0
	})
	for _, c := range []struct {
		name   string
		labels map[string]string
		min    float64
		max    float64
	}{
		{"esjet_commands_total", l("type", "trip", "command", "request_trip", "result", "ok", "namespace", "tel"), 2, 2},
		{"esjet_commands_total", l("type", "trip", "command", "lock_budget_done", "result", "ok"), 2, 2},
		{"esjet_commands_total", l("type", "trip", "command", "book_flight_done", "result", "ok"), 1, 1},
		{"esjet_commands_total", l("type", "trip", "command", "book_flight_failed", "result", "ok"), 1, 1},
		{"esjet_commands_total", l("type", "_unknown", "command", "_unknown", "result", "not_found"), 1, 1},
		{"esjet_command_duration_seconds", l("type", "trip", "command", "request_trip"), 2, 2},
		{"esjet_decide_duration_seconds", l("type", "trip"), 6, 1e9},
		{"esjet_append_duration_seconds", nil, 6, 1e9},
		{"esjet_aggregate_cache_hits_total", nil, 4, 1e9},
		{"esjet_relay_decisions_total", nil, 6, 1e9},
		{"esjet_relay_commands_total", l("result", "published"), 7, 1e9},
		{"esjet_relay_batch_size", nil, 1, 1e9},
		{"esjet_relay_delay_seconds", nil, 7, 1e9},
		{"esjet_relay_lag_seconds", nil, 0, 0},
		{"esjet_worker_attempts_total", l("kind", "book_flight", "result", "terminal"), 1, 1},
		{"esjet_worker_attempts_total", l("kind", "lock_budget", "result", "ok"), 2, 2},
		{"esjet_worker_handler_duration_seconds", l("kind", "lock_budget"), 2, 2},
		{"esjet_worker_deliveries_total", l("kind", "lock_budget", "outcome", "done"), 2, 2},
		{"esjet_worker_deliveries_total", l("kind", "book_flight", "outcome", "dead"), 1, 1},
		{"esjet_worker_receipt_read_failures_total", l("kind", "lock_budget"), 0, 0},
		{"esjet_worker_pool", l("kind", "book_flight"), 4, 4},
		{"esjet_dlq_depth", l("kind", "book_flight"), 1, 1},
		{"esjet_backlog_up", nil, 1, 1},
		{"esjet_nats_connected", nil, 1, 1},
		{"esjet_projection_health", l("projection", trip.ViewTravelerSpend, "health", "green"), 1, 1},
		{"esjet_projection_parked", l("projection", trip.ViewTravelerSpend), 0, 0},
		{"esjet_projection_lag_seconds", l("projection", trip.ViewTripsByStatus), 0, 0},
		{"esjet_nats_reconnects_total", nil, 0, 0},
		{"go_goroutines", nil, 1, 1e9},
		{"process_start_time_seconds", nil, 1, 1e12},
	} {
		v, ok := value(fams, c.name, c.labels)
		if !ok || v < c.min || v > c.max {
			t.Errorf("%s%v = %v (found %v), want %v..%v", c.name, c.labels, v, ok, c.min, c.max)
		}
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if strings.Contains(lp.GetValue(), "t1") || strings.Contains(lp.GetValue(), ":") {
					t.Errorf("%s has a label %s=%q that looks like an id: labels must be bounded", name, lp.GetName(), lp.GetValue())
				}
			}
		}
	}
}

// TestMetricsOnTheirOwnListener: http.metrics_listen serves /metrics alone,
// and the API listener no longer does.
func TestMetricsOnTheirOwnListener(t *testing.T) {
	n := tripNode(t, tripOptions{edit: func(c *config.Config) { c.HTTP.MetricsListen = "127.0.0.1:0" }})
	if n.MetricsAddr() == "" {
		t.Fatal("no metrics listener")
	}
	post(t, n, "/v1/trip/t1/request_trip", lisbon, nil, 200)
	fams := scrape(t, "http://"+n.MetricsAddr()+"/metrics")
	if v, _ := value(fams, "esjet_commands_total", l("command", "request_trip")); v != 1 {
		t.Fatalf("esjet_commands_total{command=request_trip} on the metrics listener = %v, want 1", v)
	}
	resp, err := http.Get("http://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/metrics on the API listener with http.metrics_listen set: %s, want 404", resp.Status)
	}
}

package telemetry

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// metricRef finds the metric names an expression uses (esjet's, Go's and
// the process collector's).
var metricRef = regexp.MustCompile(`\b(?:esjet|go|process)_[a-z0-9_]+\b`)

// checkExpr fails the test for an expression naming a metric t does not
// serve (a histogram's _bucket, _sum and _count are its own) or with
// unbalanced brackets.
func checkExpr(t *testing.T, tel *Telemetry, where, expr string) {
	t.Helper()
	names := tel.MetricNames()
	refs := metricRef.FindAllString(expr, -1)
	if len(refs) == 0 {
		t.Errorf("%s: expr %q names no esjet metric", where, expr)
	}
	for _, ref := range refs {
		base := ref
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(ref, suffix); ok && slices.Contains(names, b) {
				base = b
			}
		}
		if !slices.Contains(names, base) {
			t.Errorf("%s: expr uses %s, which esjet does not serve", where, ref)
		}
	}
	for _, pair := range []string{"()", "{}", "[]"} {
		if strings.Count(expr, pair[:1]) != strings.Count(expr, pair[1:]) {
			t.Errorf("%s: expr %q has unbalanced %s", where, expr, pair)
		}
	}
}

// TestAlertRulesUseMetricsThatExist reads docs/alerts/esjet.rules.yml as
// Prometheus would (groups of rules with alert, expr, for, labels,
// annotations), checks the states the README promises an alert for are
// there, and that every expr names metrics esjet serves.
func TestAlertRulesUseMetricsThatExist(t *testing.T) {
	tel, _ := newTest(t)
	raw, err := os.ReadFile("../../docs/alerts/esjet.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		t.Fatalf("esjet.rules.yml: %v", err)
	}
	var alerts []string
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v: want alert, expr, labels.severity and annotations.summary", r)
			}
			if _, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("rule %s: for %q: %v", r.Alert, r.For, err)
			}
			checkExpr(t, tel, "rule "+r.Alert, r.Expr)
		}
	}
	for _, want := range []string{"EsjetRelayLagGrowing", "EsjetDLQGrowing", "EsjetKindWithoutWorker", "EsjetNATSDisconnected"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("esjet.rules.yml has no %s (has %v)", want, alerts)
		}
	}
}

// TestDashboardUsesMetricsThatExist reads docs/grafana/esjet.json and
// checks every panel's queries name metrics esjet serves.
func TestDashboardUsesMetricsThatExist(t *testing.T) {
	tel, _ := newTest(t)
	raw, err := os.ReadFile("../../docs/grafana/esjet.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("esjet.json: %v", err)
	}
	if len(dash.Panels) < 10 {
		t.Fatalf("esjet.json has %d panels", len(dash.Panels))
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			checkExpr(t, tel, "panel "+p.Title, tg.Expr)
		}
	}
}

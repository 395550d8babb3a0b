package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/esjet/esjet"
)

// slowDecide is how long the "slow" aggregate's Decide takes.
const slowDecide = 50 * time.Millisecond

// slowDefinition is an aggregate whose Decide takes slowDecide: the time a
// request really takes is known from below.
func slowDefinition() *esjet.Definition {
	def := esjet.Define("slow", 1, func(s struct{}, e esjet.Event) struct{} { return s })
	esjet.On(def, "work", func(s struct{}, c struct{}) (esjet.Decision, error) {
		time.Sleep(slowDecide)
		return esjet.Emit("worked", c), nil
	})
	return def.Definition()
}

// microStats is the micro protocol's STATS reply for the endpoint named
// name (the service's own figures, as `nats micro stats esjet` shows them).
func microStats(t *testing.T, e *env, name string) *micro.EndpointStats {
	t.Helper()
	subj, err := micro.ControlSubject(micro.StatsVerb, "esjet", "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.nc.Request(subj, nil, replyTimeout)
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	var st micro.Stats
	if err := json.Unmarshal(m.Data, &st); err != nil {
		t.Fatalf("stats reply %s: %v", m.Data, err)
	}
	if st.Type != micro.StatsResponseType || st.Name != "esjet" || st.ID == "" {
		t.Fatalf("stats reply %s: not esjet's micro stats", m.Data)
	}
	i := slices.IndexFunc(st.Endpoints, func(ep *micro.EndpointStats) bool { return ep.Name == name })
	if i < 0 {
		t.Fatalf("stats lack endpoint %s: %s", name, m.Data)
	}
	return st.Endpoints[i]
}

// TestMicro_StatsAreTheRequestsTrueFigures: `nats micro stats` ($SRV.STATS)
// counts every request when its reply is sent, errors included, with the
// time from receipt to reply — not the microseconds it takes to hand the
// request to a goroutine, and not zero errors.
func TestMicro_StatsAreTheRequestsTrueFigures(t *testing.T) {
	t.Parallel()
	e := start(t, slowDefinition())
	ok[result](t, e.nats.Send(t, "slow", "s1", "work", []byte(`{}`), nil))
	ok[result](t, e.nats.Send(t, "slow", "s1", "work", []byte(`{}`), nil))
	failed(t, e.nats.Send(t, "slow", "s1", "play", []byte(`{}`), nil), http.StatusBadRequest, "unknown_command")
	failed(t, e.nats.State(t, "slow", "nobody"), http.StatusNotFound, "not_found")

	var ep *micro.EndpointStats
	deadline := time.Now().Add(5 * time.Second)
	for ep = microStats(t, e, "slow"); ep.NumRequests < 4 && time.Now().Before(deadline); ep = microStats(t, e, "slow") {
		time.Sleep(10 * time.Millisecond)
	}
	if ep.NumRequests != 4 || ep.NumErrors != 2 || ep.LastError == "" {
		t.Errorf("slow endpoint: %d requests, %d errors, last error %q; want 4, 2 and the 404's message", ep.NumRequests, ep.NumErrors, ep.LastError)
	}
	if ep.ProcessingTime < 2*slowDecide {
		t.Errorf("slow endpoint processing time %s for two commands whose Decide takes %s each: the time to the reply is not counted", ep.ProcessingTime, slowDecide)
	}
	if ep.AverageProcessingTime != ep.ProcessingTime/4 {
		t.Errorf("average %s, want total %s / 4", ep.AverageProcessingTime, ep.ProcessingTime)
	}
	if other := microStats(t, e, "types"); other.NumRequests != 0 {
		t.Errorf("types endpoint counted %d requests it did not get", other.NumRequests)
	}
}

package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/esjet/esjet/demo/trip"
)

type multiResult struct {
	Results []result `json:"results"`
}

func multiBody(t *testing.T, expected *uint64, ids ...string) []byte {
	t.Helper()
	var cmds []map[string]any
	for _, id := range ids {
		c := map[string]any{"type": trip.Type, "id": id, "command": trip.KindRequestTrip, "payload": request}
		if expected != nil {
			c["expected_version"] = *expected
		}
		cmds = append(cmds, c)
	}
	return mustJSON(t, map[string]any{"commands": cmds})
}

// Both surfaces append to several aggregates at once, and refuse the whole
// request, naming the aggregate, when one is not where it was expected.
func TestMulti_AllOrNothingOnBothSurfaces(t *testing.T) {
	t.Parallel()
	e := start(t)
	multi := map[string]func(body []byte) reply{
		"http": func(body []byte) reply {
			return e.http.do(t, http.MethodPost, "/v1/multi", strings.NewReader(string(body)), nil)
		},
		"nats": func(body []byte) reply { return e.nats.request(t, "esjet."+ns+".multi", body, nil) },
	}
	for _, name := range []string{"http", "nats"} {
		do := multi[name]
		a, b := name+"-a", name+"-b"
		before := e.eventsCount(t)
		got := ok[multiResult](t, do(multiBody(t, nil, a, b)))
		if len(got.Results) != 2 || got.Results[0].AggregateID != a || got.Results[1].AggregateID != b || got.Results[1].Version != 1 {
			t.Fatalf("%s: results %+v", name, got.Results)
		}
		if n := e.eventsCount(t); n != before+2 {
			t.Errorf("%s: %d new messages, want 2", name, n-before)
		}
		// c is new (version 0), a is at 1: expecting 0 of both is stale for a.
		zero := uint64(0)
		before = e.eventsCount(t)
		bad := failed(t, do(multiBody(t, &zero, name+"-c", a)), 409, "version_conflict")
		e.wantUnchanged(t, before)
		if !strings.Contains(bad.Message, "trip/"+a+" is at version 1, not the expected 0") || bad.Version == nil || *bad.Version != 1 {
			t.Errorf("%s: stale a: %+v", name, bad)
		}
		failed(t, do([]byte(`{"commands":[{"type":"trip"}], "extra": 1}`)), 400, "bad_request")
		// The body's mistakes in JSON's words, not Go's.
		for body, want := range map[string]string{
			`not json`: "not valid JSON at byte",
			`{"commands":[{"type":"trip","id":"x","command":"request_trip","expected_version":-5}]}`: `field "commands[0].expected_version" must be a whole number, 0 or more, got -5`,
		} {
			got := failed(t, do([]byte(body)), 400, "bad_request")
			if !strings.Contains(got.Message, want) || strings.Contains(got.Message, "Go struct") {
				t.Errorf("%s: body %s: message %q, want it to say %q", name, body, got.Message, want)
			}
		}
		e.wantUnchanged(t, before)
	}
}

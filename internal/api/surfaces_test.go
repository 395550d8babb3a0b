package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/esjet/esjet/demo/trip"
)

// TestSurfaces_AnswerBadAddressesAlike runs one table through HTTP and NATS:
// an unknown type or an id that is not one subject token gets the same
// status, code and message on both (NATS used to answer "no responders").
func TestSurfaces_AnswerBadAddressesAlike(t *testing.T) {
	t.Parallel()
	e := start(t)
	ok[result](t, e.http.Send(t, trip.Type, "here", trip.KindRequestTrip, mustJSON(t, request), nil))
	rawBody := []byte(`{"events":[{"type":"x"}]}`)
	for _, tc := range []struct {
		name   string
		call   func(s surface) reply
		status int
		code   string
		want   string
	}{
		{"state of an unknown type", func(s surface) reply { return s.State(t, "nope", "x1") }, 404, "unknown_type", `unknown aggregate type "nope"`},
		{"history of an unknown type", func(s surface) reply { return s.Events(t, "nope", "x1", 0) }, 404, "unknown_type", `"nope"`},
		{"command to an unknown type", func(s surface) reply { return s.Send(t, "nope", "x1", "go", []byte(`{}`), nil) }, 404, "unknown_type", `"nope"`},
		{"state of an id with a dot", func(s surface) reply { return s.State(t, trip.Type, "a.b") }, 400, "invalid_token", `invalid aggregate id "a.b": character '.' at 1`},
		{"history of an id with a dot", func(s surface) reply { return s.Events(t, trip.Type, "a.b", 0) }, 400, "invalid_token", `"a.b"`},
		{"command to an id with dots", func(s surface) reply {
			return s.Send(t, trip.Type, "a.b.c", trip.KindRequestTrip, mustJSON(t, request), nil)
		}, 400, "invalid_token", `invalid aggregate id "a.b.c"`},
		{"raw append to an id with a dot", func(s surface) reply { return s.RawAppend(t, "invoice", "a.b", rawBody, nil) }, 400, "invalid_token", `"a.b"`},
		{"raw history of an id with a dot", func(s surface) reply { return s.RawEvents(t, "invoice", "a.b") }, 400, "invalid_token", `"a.b"`},
		{"a unicode id", func(s surface) reply { return s.State(t, trip.Type, "ida-é") }, 400, "invalid_token", `character 'é' at 4`},
		{"a known type still answers", func(s surface) reply { return s.State(t, trip.Type, "nobody") }, 404, "not_found", "trip/nobody"},
	} {
		var msgs []string
		for _, s := range e.surfaces() {
			before := e.eventsCount(t)
			got := failed(t, tc.call(s), tc.status, tc.code)
			e.wantUnchanged(t, before)
			if !strings.Contains(got.Message, tc.want) {
				t.Errorf("%s on %s: message %q does not contain %q", tc.name, s.Name(), got.Message, tc.want)
			}
			msgs = append(msgs, got.Message)
		}
		if msgs[0] != msgs[1] {
			t.Errorf("%s: HTTP says %q, NATS %q", tc.name, msgs[0], msgs[1])
		}
	}
	// A known type keeps being served, by whichever endpoint gets it.
	for range 20 {
		ok[tripState](t, e.nats.State(t, trip.Type, "here"))
	}
}

func TestNATS_SubjectOfNoKnownShapeIsNoRoute(t *testing.T) {
	t.Parallel()
	e := start(t)
	for _, subj := range []string{"esjet." + ns + ".trip.t1", "esjet." + ns + ".trip"} {
		r := e.nats.request(t, subj, nil, nil)
		got := failed(t, r, http.StatusNotFound, "no_route")
		if !strings.Contains(got.Message, "no route for subject "+subj) || !strings.Contains(got.Message, "esjet."+ns+".<type>.<id>.state") {
			t.Errorf("%s: %q does not name the subject and the routes", subj, got.Message)
		}
	}
}

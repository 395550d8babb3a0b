package api_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/esjettest"
)

// goWords are what a user must not read in an error: a Go package prefix
// at the start of a layer, a Go type or struct name, or JSON's HTML escape.
var goWords = regexp.MustCompile(`(^|: )(aggregate|streams|outbox|consumer|api|json|nats): |Go struct|\\u003[ce]|main\.`)

func TestErrors_SpeakToTheUserNotInGo(t *testing.T) {
	t.Parallel()
	e := start(t, arrowDefinition())
	for _, s := range e.surfaces() {
		for _, tc := range []struct {
			name   string
			r      func() reply
			status int
			code   string
			want   string // part of the message
		}{
			{"unknown command", func() reply { return s.Send(t, trip.Type, "g1", "fly", []byte(`{}`), nil) }, 400, "unknown_command", `trip has no command "fly"`},
			{"wrong field type", func() reply {
				return s.Send(t, trip.Type, "g1", trip.KindRequestTrip, []byte(`{"budget":"lots"}`), nil)
			}, 400, "bad_payload", `field "budget" must be a number, got a string`},
			{"unknown field", func() reply {
				return s.Send(t, trip.Type, "g1", trip.KindRequestTrip, []byte(`{"seat":"12A"}`), nil)
			}, 400, "bad_payload", `unknown field "seat"`},
			{"unicode id counted by character", func() reply { return s.State(t, trip.Type, strings.Repeat("é", 130)) }, 400, "invalid_token", "130 characters, longer than 128"},
			{"unicode character named", func() reply { return s.State(t, trip.Type, "aé") }, 400, "invalid_token", `character 'é' at 1`},
			{"rejection with an arrow", func() reply { return s.Send(t, "arrow", "g1", "go", []byte(`{}`), nil) }, 422, "one_way", "a -> b <c> & d"},
		} {
			r := tc.r()
			got := failed(t, r, tc.status, tc.code)
			if !strings.Contains(got.Message, tc.want) {
				t.Errorf("%s %s: message %q does not contain %q", s.Name(), tc.name, got.Message, tc.want)
			}
			if goWords.Match(r.Body) {
				t.Errorf("%s %s: reply %s speaks Go", s.Name(), tc.name, r.Body)
			}
		}
	}
}

// arrow rejects with a message full of characters JSON would HTML-escape.
func arrowDefinition() *esjet.Definition {
	def := esjet.Define("arrow", 1, func(s struct{}, _ esjet.Event) struct{} { return s })
	esjet.On(def, "go", func(struct{}, struct{}) (esjet.Decision, error) {
		return esjet.Decision{}, esjet.Reject("one_way", "a -> b <c> & d")
	})
	return def.Definition()
}

func TestHTTP_NoRouteAndWrongMethodAnswerTheJSONErrorShape(t *testing.T) {
	t.Parallel()
	e := start(t)
	for _, tc := range []struct {
		method, path string
		status       int
		code, want   string
	}{
		{http.MethodGet, "/v1/trip/t1/events/extra", 404, "no_route", "the routes are: POST /v1/<type>/<id>/<command>"},
		{http.MethodGet, "/nowhere", 404, "no_route", "GET /nowhere"},
		{http.MethodDelete, "/v1/types", 405, "method_not_allowed", "DELETE is not allowed on /v1/types; use GET"},
		{http.MethodPut, "/v1/trip/t1/request_trip", 405, "method_not_allowed", "PUT is not allowed"},
		{http.MethodPost, "/healthz", 405, "method_not_allowed", "use GET"},
	} {
		r := e.http.do(t, tc.method, tc.path, nil, nil)
		got := failed(t, r, tc.status, tc.code)
		if !strings.Contains(got.Message, tc.want) {
			t.Errorf("%s %s: message %q does not contain %q", tc.method, tc.path, got.Message, tc.want)
		}
	}
}

func TestHTTP_RepliesAreCompactJSON(t *testing.T) {
	t.Parallel()
	e := start(t)
	r := e.http.Send(t, trip.Type, "c1", trip.KindRequestTrip, mustJSON(t, request), nil)
	ok[result](t, r)
	for _, body := range [][]byte{r.Body, e.http.Events(t, trip.Type, "c1", 0).Body, e.http.State(t, trip.Type, "c1").Body} {
		if n := strings.Count(strings.TrimSpace(string(body)), "\n"); n != 0 || strings.Contains(string(body), "  ") {
			t.Errorf("reply is not compact (%d newlines): %s", n, body)
		}
	}
}

func TestNew_RefusesATypeThatIsARouteWord(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ typ, kind, want string }{
		{"raw", "touch", `aggregate type "raw" collides with the API's routes (reserved: raw, types, ops, state, events, log, views, multi); rename the type`},
		{"types", "touch", `aggregate type "types" collides`},
		{"state", "touch", `aggregate type "state" collides`},
		{"ops", "touch", `aggregate type "ops" collides`},
		{"ledger", "state", `command kind "state" of aggregate type "ledger" collides with the API's routes (reserved: raw, types, ops, state, events, log, views, multi); rename the command`},
		{"ledger", "events", `command kind "events" of aggregate type "ledger" collides`},
	} {
		def := esjet.Define(tc.typ, 1, func(s struct{}, _ esjet.Event) struct{} { return s })
		esjet.On(def, tc.kind, func(struct{}, struct{}) (esjet.Decision, error) { return esjet.Emit("touched", nil), nil })
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		n, err := esjet.Start(ctx, esjet.Options{Config: esjettest.Config(t), Aggregates: []*esjet.Definition{def.Definition()}})
		cancel()
		if err == nil {
			_ = n.Close(t.Context())
			t.Fatalf("a node with aggregate type %q and command %q started", tc.typ, tc.kind)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("start with %s.%s: %v, want it to say %q", tc.typ, tc.kind, err, tc.want)
		}
	}
}

// TestErrors_BodyMistakesAreSaidInTheAPIsWords: a body's mistakes name the
// field as the caller wrote it (its JSON path, its body name rather than a
// header's), what it must be in the API's terms (a log's after is a
// position, a history's a version), and never encoding/json's Go text.
func TestErrors_BodyMistakesAreSaidInTheAPIsWords(t *testing.T) {
	t.Parallel()
	e := start(t)
	long := strings.Repeat("c", 300)
	for _, tc := range []struct {
		name, subject, body string
		code                string
		want                []string
	}{
		{"log after below 0", "esjet." + ns + ".log", `{"after":-5}`, "bad_request",
			[]string{"after must be a position: a whole number, 0 or more", "got -5"}},
		{"history after below 0", subject(trip.Type, "h1", "events"), `{"after":-5}`, "bad_request",
			[]string{"after must be a version: a whole number, 0 or more", "got -5"}},
		{"log limit of 0", "esjet." + ns + ".log", `{"limit":0}`, "bad_request", []string{"limit must be 1 to 1000 events, got 0"}},
		{"log body not JSON", "esjet." + ns + ".log", `not json`, "bad_request",
			[]string{`log request body must be {"after": <position>`, "not valid JSON at byte 2: unexpected 'o'"}},
		{"raw expected_version below 0", "esjet." + ns + ".raw.append." + rawType + ".j1", `{"expected_version":-1,"events":[{"type":"a"}]}`, "bad_request",
			[]string{`field "expected_version" must be a whole number, 0 or more, got -1`}},
		{"raw body not JSON", "esjet." + ns + ".raw.append." + rawType + ".j1", `not json`, "bad_request",
			[]string{"raw append body: not valid JSON at byte 2: unexpected 'o'"}},
		{"raw event of the wrong kind", "esjet." + ns + ".raw.append." + rawType + ".j1", `{"expected_version":0,"events":[{"type":"a"},{"type":5}]}`, "bad_request",
			[]string{`field "events[1].type" must be a string, got a number`}},
		{"raw correlation_id too long", "esjet." + ns + ".raw.append." + rawType + ".j1", `{"expected_version":0,"events":[{"type":"a"}],"correlation_id":"` + long + `"}`, "invalid_header",
			[]string{"correlation_id is 300 characters, longer than 256"}},
		{"raw idempotency_key too long", "esjet." + ns + ".raw.append." + rawType + ".j1", `{"expected_version":0,"events":[{"type":"a"}],"idempotency_key":"` + long + `"}`, "invalid_idempotency_key",
			[]string{"idempotency_key is 300 characters, longer than 256"}},
		{"command payload not JSON", subject(trip.Type, "j1", trip.KindRequestTrip), `not json`, "bad_payload",
			[]string{"not valid JSON at byte 2: unexpected 'o'"}},
		{"command budget out of range", subject(trip.Type, "j1", trip.KindRequestTrip), `{"budget":1e30}`, "bad_payload",
			[]string{`field "budget" is out of range: must be a whole number from`, "got 1e30"}},
		{"command budget with a fraction", subject(trip.Type, "j1", trip.KindRequestTrip), `{"budget":1.5}`, "bad_payload",
			[]string{`field "budget" must be a whole number, got 1.5`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.eventsCount(t)
			r := e.nats.request(t, tc.subject, []byte(tc.body), nil)
			got := failed(t, r, 400, tc.code)
			for _, w := range tc.want {
				if !strings.Contains(got.Message, w) {
					t.Errorf("message %q does not contain %q", got.Message, w)
				}
			}
			for _, bad := range []string{"uint64", "int64", "Go struct", "literal null", "Esjet-", "version>"} {
				if strings.Contains(got.Message, bad) && !(bad == "version>" && strings.Contains(tc.subject, ".events")) {
					t.Errorf("message %q says %q", got.Message, bad)
				}
			}
			e.wantUnchanged(t, before)
		})
	}
}

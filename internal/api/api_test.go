package api_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/esjettest"
	"github.com/esjet/esjet/internal/natstest"
)

// The tests below pin the API contract of the package doc on both surfaces:
// every case runs through HTTP and through the NATS micro service against a
// real embedded node, and decodes the wire JSON into the local types here
// (not the server's), so a renamed field or a changed status fails a test.

const (
	ns           = "test" // esjettest's namespace
	eventsStream = "TEST_EVENTS"
	maxBody      = 1 << 20 // streams.max_message_size in esjettest
	// replyTimeout bounds a NATS request's wait. A megabyte request that
	// decides into a decision over the limit takes ~1.5 s under -race on a
	// quiet machine; at load ~20 that passed 10 s (CI's -race run).
	replyTimeout = 30 * time.Second
)

// Wire shapes, as a client reads them.
type (
	result struct {
		AggregateType string `json:"aggregate_type"`
		AggregateID   string `json:"aggregate_id"`
		Version       uint64 `json:"version"`
		DecisionID    string `json:"decision_id"`
		Seq           uint64 `json:"seq"`
		Events        []struct {
			ID      string `json:"id"`
			Type    string `json:"type"`
			Version uint64 `json:"version"`
			Seq     uint64 `json:"seq"`
		} `json:"events"`
		Commands []struct {
			ID     string `json:"id"`
			Kind   string `json:"kind"`
			Report bool   `json:"report"`
		} `json:"commands"`
		Replayed bool `json:"replayed"`
	}
	history struct {
		AggregateType string `json:"aggregate_type"`
		AggregateID   string `json:"aggregate_id"`
		Version       uint64 `json:"version"`
		Seq           uint64 `json:"seq"`
		Events        []struct {
			ID         string          `json:"id"`
			Type       string          `json:"type"`
			Schema     int             `json:"schema"`
			Version    uint64          `json:"version"`
			Time       time.Time       `json:"time"`
			Seq        uint64          `json:"seq"`
			DecisionID string          `json:"decision_id"`
			Data       json.RawMessage `json:"data"`
		} `json:"events"`
		Commands []struct {
			ID      string          `json:"id"`
			Kind    string          `json:"kind"`
			Seq     uint64          `json:"seq"`
			Report  bool            `json:"report"`
			Payload json.RawMessage `json:"payload"`
		} `json:"commands"`
	}
	tripState struct {
		AggregateType string `json:"aggregate_type"`
		AggregateID   string `json:"aggregate_id"`
		Position      struct {
			Seq     uint64 `json:"seq"`
			Version uint64 `json:"version"`
		} `json:"position"`
		State trip.State `json:"state"`
	}
	typeInfo struct {
		Type     string   `json:"type"`
		Commands []string `json:"commands"`
	}
	apiError struct {
		Code    string  `json:"code"`
		Message string  `json:"message"`
		Version *uint64 `json:"version"`
	}
)

// reply is one answer from either surface: status 200 for a success, the
// error's status otherwise.
type reply struct {
	Status int
	Body   []byte
}

// surface is one way to reach the API.
type surface interface {
	Name() string
	Send(t *testing.T, typ, id, kind string, body []byte, h http.Header) reply
	// TrySend is Send for other goroutines: a transport error is returned.
	TrySend(t *testing.T, typ, id, kind string, body []byte, h http.Header) (reply, error)
	State(t *testing.T, typ, id string) reply
	Events(t *testing.T, typ, id string, after uint64) reply
	RawAppend(t *testing.T, typ, id string, body []byte, h http.Header) reply
	RawEvents(t *testing.T, typ, id string) reply
	Types(t *testing.T) reply
}

// env is one node with clients for both surfaces.
type env struct {
	node *esjet.Node
	nc   *nats.Conn
	js   jetstream.JetStream
	http *httpSurface
	nats *natsSurface
}

func start(t *testing.T, defs ...*esjet.Definition) *env {
	t.Helper()
	cfg := esjettest.Config(t)
	cfg.Aggregates.Raw = map[string]config.RawType{rawType: {Commands: []string{rawCommand}}}
	n := esjettest.StartWith(t, cfg, append([]*esjet.Definition{trip.Definition()}, defs...)...)
	nc, err := nats.Connect(n.NATSURL())
	if err != nil {
		t.Fatalf("connect to %s: %v", n.NATSURL(), err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return &env{node: n, nc: nc, js: js,
		http: &httpSurface{base: "http://" + n.HTTPAddr()}, nats: &natsSurface{nc: nc}}
}

func (e *env) surfaces() []surface { return []surface{e.http, e.nats} }

// eventsCount is the number of messages in the namespace's event stream.
func (e *env) eventsCount(t *testing.T) uint64 {
	t.Helper()
	s, err := e.js.Stream(t.Context(), eventsStream)
	if err != nil {
		t.Fatalf("stream %s: %v", eventsStream, err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatalf("stream %s info: %v", eventsStream, err)
	}
	return info.State.Msgs
}

// wantUnchanged fails when the event stream's count moved from before.
func (e *env) wantUnchanged(t *testing.T, before uint64) {
	t.Helper()
	if got := e.eventsCount(t); got != before {
		t.Errorf("%s holds %d messages, want %d: the request wrote something", eventsStream, got, before)
	}
}

type httpSurface struct{ base string }

func (*httpSurface) Name() string { return "http" }

func (s *httpSurface) do(t *testing.T, method, path string, body io.Reader, h http.Header) reply {
	t.Helper()
	r, err := s.tryDo(t, method, path, body, h)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (s *httpSurface) tryDo(t *testing.T, method, path string, body io.Reader, h http.Header) (reply, error) {
	req, err := http.NewRequestWithContext(t.Context(), method, s.base+path, body)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if method != http.MethodGet && method != http.MethodHead {
		req.Header.Set("Content-Type", "application/json") // as every client must
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		return reply{}, fmt.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	return reply{Status: resp.StatusCode, Body: b}, nil
}

func (s *httpSurface) TrySend(t *testing.T, typ, id, kind string, body []byte, h http.Header) (reply, error) {
	return s.tryDo(t, http.MethodPost, "/v1/"+typ+"/"+id+"/"+kind, bytes.NewReader(body), h)
}

func (s *httpSurface) Send(t *testing.T, typ, id, kind string, body []byte, h http.Header) reply {
	t.Helper()
	return s.do(t, http.MethodPost, "/v1/"+typ+"/"+id+"/"+kind, bytes.NewReader(body), h)
}

func (s *httpSurface) State(t *testing.T, typ, id string) reply {
	t.Helper()
	return s.do(t, http.MethodGet, "/v1/"+typ+"/"+id, nil, nil)
}

func (s *httpSurface) Events(t *testing.T, typ, id string, after uint64) reply {
	t.Helper()
	q := ""
	if after > 0 {
		q = "?after=" + strconv.FormatUint(after, 10)
	}
	return s.do(t, http.MethodGet, "/v1/"+typ+"/"+id+"/events"+q, nil, nil)
}

func (s *httpSurface) RawAppend(t *testing.T, typ, id string, body []byte, h http.Header) reply {
	t.Helper()
	return s.do(t, http.MethodPost, "/v1/raw/"+typ+"/"+id+"/events", bytes.NewReader(body), h)
}

func (s *httpSurface) RawEvents(t *testing.T, typ, id string) reply {
	t.Helper()
	return s.do(t, http.MethodGet, "/v1/raw/"+typ+"/"+id+"/events", nil, nil)
}

func (s *httpSurface) Types(t *testing.T) reply {
	t.Helper()
	return s.do(t, http.MethodGet, "/v1/types", nil, nil)
}

type natsSurface struct{ nc *nats.Conn }

func (*natsSurface) Name() string { return "nats" }

// request sends one request and turns a micro error reply into its status,
// checking that the error headers agree with the JSON body.
func (s *natsSurface) request(t *testing.T, subject string, body []byte, h http.Header) reply {
	t.Helper()
	m, err := s.requestErr(subject, body, h)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	return m
}

func (s *natsSurface) requestErr(subject string, body []byte, h http.Header) (reply, error) {
	msg := nats.NewMsg(subject)
	msg.Data = body
	for k, v := range h {
		msg.Header[k] = v
	}
	m, err := s.nc.RequestMsg(msg, replyTimeout)
	if err != nil {
		return reply{}, err
	}
	code := m.Header.Get(micro.ErrorCodeHeader)
	if code == "" {
		return reply{Status: http.StatusOK, Body: m.Data}, nil
	}
	status, err := strconv.Atoi(code)
	if err != nil {
		return reply{}, fmt.Errorf("%s = %q, want an HTTP-like status", micro.ErrorCodeHeader, code)
	}
	var e struct{ Error apiError }
	if err := json.Unmarshal(m.Data, &e); err != nil {
		return reply{}, fmt.Errorf("error reply body %q: %v", m.Data, err)
	}
	if got := m.Header.Get(micro.ErrorHeader); got != e.Error.Message {
		return reply{}, fmt.Errorf("%s = %q, want the body's message %q", micro.ErrorHeader, got, e.Error.Message)
	}
	return reply{Status: status, Body: m.Data}, nil
}

func (s *natsSurface) TrySend(_ *testing.T, typ, id, kind string, body []byte, h http.Header) (reply, error) {
	return s.requestErr(subject(typ, id, kind), body, h)
}

func (s *natsSurface) Send(t *testing.T, typ, id, kind string, body []byte, h http.Header) reply {
	t.Helper()
	return s.request(t, subject(typ, id, kind), body, h)
}

func (s *natsSurface) State(t *testing.T, typ, id string) reply {
	t.Helper()
	return s.request(t, subject(typ, id, "state"), nil, nil)
}

func (s *natsSurface) Events(t *testing.T, typ, id string, after uint64) reply {
	t.Helper()
	var h http.Header
	if after > 0 {
		h = http.Header{"Esjet-After-Version": {strconv.FormatUint(after, 10)}}
	}
	return s.request(t, subject(typ, id, "events"), nil, h)
}

func (s *natsSurface) RawAppend(t *testing.T, typ, id string, body []byte, h http.Header) reply {
	t.Helper()
	return s.request(t, "esjet."+ns+".raw.append."+typ+"."+id, body, h)
}

func (s *natsSurface) RawEvents(t *testing.T, typ, id string) reply {
	t.Helper()
	return s.request(t, "esjet."+ns+".raw.events."+typ+"."+id, nil, nil)
}

func (s *natsSurface) Types(t *testing.T) reply {
	t.Helper()
	return s.request(t, "esjet."+ns+".types", nil, nil)
}

func subject(typ, id, op string) string { return "esjet." + ns + "." + typ + "." + id + "." + op }

func idemKey(k string) http.Header { return http.Header{"Idempotency-Key": {k}} }

// ok decodes a 200 reply into T.
func ok[T any](t *testing.T, r reply) T {
	t.Helper()
	var v T
	if r.Status != http.StatusOK {
		t.Fatalf("status %d, want 200; body %s", r.Status, r.Body)
	}
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, r.Body, err)
	}
	return v
}

// failed checks an error reply's status and code and returns the error.
func failed(t *testing.T, r reply, status int, code string) apiError {
	t.Helper()
	var e struct {
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &e); err != nil || e.Error == nil {
		t.Fatalf("status %d body %s: not an {\"error\": …} reply (%v)", r.Status, r.Body, err)
	}
	if r.Status != status || e.Error.Code != code {
		t.Fatalf("got %d %s (%s), want %d %s", r.Status, e.Error.Code, e.Error.Message, status, code)
	}
	if e.Error.Message == "" {
		t.Errorf("%d %s has an empty message", status, code)
	}
	return *e.Error
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jsonEqual compares a JSON document with want's JSON encoding, by value.
func jsonEqual(t *testing.T, what string, got json.RawMessage, want any) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %s is not JSON: %v", what, got, err)
	}
	if err := json.Unmarshal(mustJSON(t, want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s = %s, want %s", what, got, mustJSON(t, want))
	}
}

var request = trip.RequestTrip{Traveler: "ada", Destination: "Lisbon", Budget: 100_000, FlightPrice: 30_000, HotelPrice: 20_000}

func TestSendCommand_RecordsEventIssuesCommandAndShowsInStateAndHistory(t *testing.T) {
	t.Parallel()
	e := start(t)
	for _, s := range e.surfaces() {
		t.Run(s.Name(), func(t *testing.T) {
			id := "t1-" + s.Name()
			if s.Name() == "http" {
				id = "t1"
			}
			res := ok[result](t, s.Send(t, trip.Type, id, trip.KindRequestTrip, mustJSON(t, request), nil))
			if res.AggregateType != trip.Type || res.AggregateID != id || res.Version != 1 || res.DecisionID == "" || res.Seq == 0 || res.Replayed {
				t.Errorf("result %+v, want trip/%s at version 1 with a decision id and a seq, not replayed", res, id)
			}
			if len(res.Events) != 1 || res.Events[0].Type != trip.EventTripRequested || res.Events[0].Version != 1 ||
				res.Events[0].Seq != res.Seq || res.Events[0].ID == "" {
				t.Errorf("events %+v, want one trip_requested at version 1, seq %d", res.Events, res.Seq)
			}
			wantCmd := "trip:" + id + ":1:0"
			if len(res.Commands) != 1 || res.Commands[0].ID != wantCmd || res.Commands[0].Kind != trip.KindLockBudget || !res.Commands[0].Report {
				t.Errorf("commands %+v, want one reported lock_budget with id %s", res.Commands, wantCmd)
			}

			st := ok[tripState](t, s.State(t, trip.Type, id))
			if st.AggregateType != trip.Type || st.AggregateID != id || st.Position.Version != 1 || st.Position.Seq != res.Seq {
				t.Errorf("state header %+v, want trip/%s at version 1, seq %d", st, id, res.Seq)
			}
			if st.State.Status != trip.StatusRequested || st.State.Traveler != "ada" || st.State.Amount != 50_000 {
				t.Errorf("state %+v, want requested for ada with 50000 locked-to-be", st.State)
			}

			h := ok[history](t, s.Events(t, trip.Type, id, 0))
			if h.AggregateType != trip.Type || h.AggregateID != id || h.Version != 1 || h.Seq != res.Seq {
				t.Errorf("history header %+v, want trip/%s version 1 seq %d", h, id, res.Seq)
			}
			if len(h.Events) != 1 {
				t.Fatalf("history has %d events, want 1", len(h.Events))
			}
			ev := h.Events[0]
			if ev.ID != res.Events[0].ID || ev.Type != trip.EventTripRequested || ev.Version != 1 || ev.Seq != res.Seq ||
				ev.DecisionID != res.DecisionID || ev.Schema != 2 || ev.Time.IsZero() { // trip_requested is at schema 2
				t.Errorf("history event %+v, want the recorded trip_requested of decision %s", ev, res.DecisionID)
			}
			jsonEqual(t, "event data", ev.Data, trip.TripRequested{Traveler: request.Traveler, Destination: request.Destination,
				Budget: request.Budget, FlightPrice: request.FlightPrice, HotelPrice: request.HotelPrice})
			if len(h.Commands) != 1 || h.Commands[0].ID != wantCmd || h.Commands[0].Kind != trip.KindLockBudget ||
				h.Commands[0].Seq != res.Seq || !h.Commands[0].Report {
				t.Fatalf("history commands %+v, want the lock_budget %s", h.Commands, wantCmd)
			}
			jsonEqual(t, "command payload", h.Commands[0].Payload, trip.LockBudget{Traveler: "ada", Amount: 50_000})

			// after=1 leaves nothing to show but keeps the aggregate's position.
			h = ok[history](t, s.Events(t, trip.Type, id, 1))
			if h.Version != 1 || len(h.Events) != 0 || len(h.Commands) != 0 {
				t.Errorf("history after version 1 = %+v, want version 1 with no events or commands", h)
			}
		})
	}
}

func TestSendCommand_CommandsOnOneAggregateMixSurfaces(t *testing.T) {
	t.Parallel()
	e := start(t)
	ok[result](t, e.http.Send(t, trip.Type, "mix", trip.KindRequestTrip, mustJSON(t, request), nil))
	res := ok[result](t, e.nats.Send(t, trip.Type, "mix", trip.KindAddNote, []byte(`{"text":"window seat"}`), nil))
	if res.Version != 2 || len(res.Commands) != 0 {
		t.Errorf("add_note over NATS after request_trip over HTTP: %+v, want version 2 and no commands", res)
	}
	for _, s := range e.surfaces() {
		if st := ok[tripState](t, s.State(t, trip.Type, "mix")); st.State.Notes != 1 || st.Position.Version != 2 {
			t.Errorf("%s state %+v, want 1 note at version 2", s.Name(), st)
		}
	}
}

func TestIdempotencyKey_RetryReplaysFirstDecisionAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := start(t)
	for _, s := range e.surfaces() {
		t.Run(s.Name(), func(t *testing.T) {
			id := "idem-" + s.Name()
			key := idemKey("k-" + s.Name())
			first := ok[result](t, s.Send(t, trip.Type, id, trip.KindRequestTrip, mustJSON(t, request), key))
			if first.Replayed {
				t.Errorf("first request says replayed")
			}
			before := e.eventsCount(t)

			// The same request, re-indented: insignificant whitespace is the same request.
			indented, _ := json.MarshalIndent(request, "", "    ")
			again := ok[result](t, s.Send(t, trip.Type, id, trip.KindRequestTrip, indented, key))
			if !again.Replayed || again.DecisionID != first.DecisionID || again.Seq != first.Seq || again.Version != first.Version ||
				len(again.Commands) != 1 || again.Commands[0].ID != first.Commands[0].ID {
				t.Errorf("retry = %+v, want the first result %+v, replayed", again, first)
			}
			e.wantUnchanged(t, before)

			other := request
			other.Budget++
			err := failed(t, s.Send(t, trip.Type, id, trip.KindRequestTrip, mustJSON(t, other), key), http.StatusConflict, "idempotency_key_reused")
			if !strings.Contains(err.Message, "idempotency key reused") {
				t.Errorf("message %q does not say the key was reused", err.Message)
			}
			e.wantUnchanged(t, before)

			// Same key, another command kind on the same trip: also a reuse.
			failed(t, s.Send(t, trip.Type, id, trip.KindAddNote, []byte(`{"text":"x"}`), key), http.StatusConflict, "idempotency_key_reused")
			e.wantUnchanged(t, before)

			if st := ok[tripState](t, s.State(t, trip.Type, id)); st.Position.Version != 1 {
				t.Errorf("trip at version %d after retries, want 1", st.Position.Version)
			}
		})
	}
}

func TestIdempotencyKey_RetryOnTheOtherSurfaceReplays(t *testing.T) {
	t.Parallel()
	e := start(t)
	key := idemKey("cross")
	first := ok[result](t, e.http.Send(t, trip.Type, "cross", trip.KindRequestTrip, mustJSON(t, request), key))
	before := e.eventsCount(t)
	again := ok[result](t, e.nats.Send(t, trip.Type, "cross", trip.KindRequestTrip, mustJSON(t, request), key))
	if !again.Replayed || again.DecisionID != first.DecisionID || again.Seq != first.Seq {
		t.Errorf("NATS retry of an HTTP request = %+v, want decision %s replayed", again, first.DecisionID)
	}
	e.wantUnchanged(t, before)
}

func TestIdempotencyKey_LongerThan256IsRejected(t *testing.T) {
	t.Parallel()
	e := start(t)
	before := e.eventsCount(t)
	for _, s := range e.surfaces() {
		r := s.Send(t, trip.Type, "longkey", trip.KindRequestTrip, mustJSON(t, request), idemKey(strings.Repeat("k", 257)))
		failed(t, r, http.StatusBadRequest, "invalid_idempotency_key")
	}
	e.wantUnchanged(t, before)
}

func TestBadRequest_AnsweredWithStatusAndCodeAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := start(t)
	ok[result](t, e.http.Send(t, trip.Type, "exists", trip.KindRequestTrip, mustJSON(t, request), nil))

	type tc struct {
		name   string
		call   func(t *testing.T, s surface) reply
		status int
		code   string
	}
	send := func(typ, id, kind, body string) func(*testing.T, surface) reply {
		return func(t *testing.T, s surface) reply { return s.Send(t, typ, id, kind, []byte(body), nil) }
	}
	good := string(mustJSON(t, request))
	both := []tc{
		{"malformed JSON", send(trip.Type, "b1", trip.KindRequestTrip, `{"traveler":`), 400, "bad_payload"},
		{"unknown field", send(trip.Type, "b1", trip.KindRequestTrip, `{"traveler":"ada","seat":"12A"}`), 400, "bad_payload"},
		{"wrong field type", send(trip.Type, "b1", trip.KindRequestTrip, `{"traveler":"ada","budget":"lots"}`), 400, "bad_payload"},
		{"trailing data", send(trip.Type, "b1", trip.KindRequestTrip, good+` {}`), 400, "bad_payload"},
		{"JSON array", send(trip.Type, "b1", trip.KindRequestTrip, `[]`), 400, "bad_payload"},
		{"unknown command", send(trip.Type, "b1", "fly_me_there", good), 400, "unknown_command"},
		{"issued kind is not a command the trip handles", send(trip.Type, "exists", trip.KindLockBudget, `{}`), 400, "unknown_command"},
		{"empty body decodes as {} and fails validation", send(trip.Type, "b1", trip.KindRequestTrip, ``), 422, "invalid_request"},
		{"budget exceeded", send(trip.Type, "b1", trip.KindRequestTrip,
			`{"traveler":"ada","destination":"Lisbon","budget":100,"flight_price":80,"hotel_price":30}`), 422, "budget_exceeded"},
		{"already requested", send(trip.Type, "exists", trip.KindRequestTrip, good), 422, "already_requested"},
		{"note on a missing trip: a domain not_found is 404", send(trip.Type, "b1", trip.KindAddNote, `{"text":"hi"}`), 404, "not_found"},
		{"id longer than 128", send(trip.Type, strings.Repeat("x", 129), trip.KindRequestTrip, good), 400, "invalid_token"},
		{"state of a missing aggregate", func(t *testing.T, s surface) reply { return s.State(t, trip.Type, "nobody") }, 404, "not_found"},
		{"events of a missing aggregate", func(t *testing.T, s surface) reply { return s.Events(t, trip.Type, "nobody", 0) }, 404, "not_found"},
		{"request body over the limit", send(trip.Type, "b1", trip.KindRequestTrip, `{"traveler":"`+strings.Repeat("a", maxBody)+`"}`), 413, "too_large"},
		// Under the body limit, but the decision records the traveler twice
		// (event and lock_budget payload): over streams.max_message_size.
		{"decision over the limit", send(trip.Type, "b1", trip.KindRequestTrip,
			`{"traveler":"`+strings.Repeat("a", maxBody-200)+`","destination":"x","budget":100,"flight_price":1,"hotel_price":1}`), 413, "too_large"},
	}
	httpOnly := []tc{
		{"unknown type", send("invoice", "b1", "issue", `{}`), 404, "unknown_type"},
		{"state of an unknown type", func(t *testing.T, s surface) reply { return s.State(t, "invoice", "b1") }, 404, "unknown_type"},
		{"events of an unknown type", func(t *testing.T, s surface) reply { return s.Events(t, "invoice", "b1", 0) }, 404, "unknown_type"},
		{"id with a wildcard", send(trip.Type, "a*b", trip.KindRequestTrip, good), 400, "invalid_token"},
		{"id with a dot", send(trip.Type, "a.b", trip.KindRequestTrip, good), 400, "invalid_token"},
		{"id of 300 characters", send(trip.Type, strings.Repeat("x", 300), trip.KindRequestTrip, good), 400, "invalid_token"},
		{"state of an invalid id", func(t *testing.T, s surface) reply { return s.State(t, trip.Type, "a*b") }, 400, "invalid_token"},
		{"events of an invalid id", func(t *testing.T, s surface) reply { return s.Events(t, trip.Type, "a*b", 0) }, 400, "invalid_token"},
		{"after that is not a number", func(t *testing.T, s surface) reply {
			return e.http.do(t, http.MethodGet, "/v1/trip/exists/events?after=two", nil, nil)
		}, 400, "bad_request"},
		{"chunked body over the limit", func(t *testing.T, s surface) reply {
			// No Content-Length: the limit is enforced while reading.
			body := io.MultiReader(strings.NewReader(`{"traveler":"`), strings.NewReader(strings.Repeat("a", maxBody)))
			return e.http.do(t, http.MethodPost, "/v1/trip/b1/request_trip", body, nil)
		}, 413, "too_large"},
	}
	run := func(s surface, cases []tc) {
		t.Run(s.Name(), func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					before := e.eventsCount(t)
					failed(t, c.call(t, s), c.status, c.code)
					e.wantUnchanged(t, before)
				})
			}
		})
	}
	run(e.http, append(both, httpOnly...))
	run(e.nats, both)

	t.Run("nats/unknown type is 404 as on HTTP, not no responders", func(t *testing.T) {
		before := e.eventsCount(t)
		failed(t, e.nats.Send(t, "invoice", "b1", "issue", []byte(`{}`), nil), 404, "unknown_type")
		e.wantUnchanged(t, before)
	})
	t.Run("nats/message over max_payload is refused by the client", func(t *testing.T) {
		before := e.eventsCount(t)
		big := make([]byte, e.nc.MaxPayload()+1)
		_, err := e.nats.requestErr(subject(trip.Type, "b1", trip.KindRequestTrip), big, nil)
		if !errors.Is(err, nats.ErrMaxPayload) {
			t.Errorf("request of %d bytes: %v, want %v", len(big), err, nats.ErrMaxPayload)
		}
		e.wantUnchanged(t, before)
	})
	t.Run("trip still answers after the bad requests", func(t *testing.T) {
		if st := ok[tripState](t, e.nats.State(t, trip.Type, "exists")); st.Position.Version != 1 {
			t.Errorf("trip exists at version %d, want 1", st.Position.Version)
		}
	})
}

func TestRawAppend_VersionedAppendConflictReplayAndLoad(t *testing.T) {
	t.Parallel()
	e := start(t)
	for _, s := range e.surfaces() {
		t.Run(s.Name(), func(t *testing.T) {
			id := "i1-" + s.Name()
			if s.Name() == "http" {
				id = "i1"
			}
			first := `{"expected_version":0,"events":[{"type":"issued","data":{"amount":1200,"currency":"EUR"}}],` +
				`"commands":[{"kind":"send_invoice","payload":{"to":"ada@example.com"}}],"idempotency_key":"issue-1"}`
			res := ok[result](t, s.RawAppend(t, "invoice", id, []byte(first), nil))
			wantCmd := "invoice:" + id + ":1:0"
			if res.AggregateType != "invoice" || res.AggregateID != id || res.Version != 1 || res.Replayed ||
				len(res.Events) != 1 || res.Events[0].Type != "issued" || res.Events[0].Version != 1 ||
				len(res.Commands) != 1 || res.Commands[0].ID != wantCmd || res.Commands[0].Kind != "send_invoice" {
				t.Fatalf("first append = %+v, want version 1 with issued and %s", res, wantCmd)
			}

			before := e.eventsCount(t)
			stale := `{"expected_version":0,"events":[{"type":"paid"}]}`
			conflict := failed(t, s.RawAppend(t, "invoice", id, []byte(stale), nil), http.StatusConflict, "version_conflict")
			if conflict.Version == nil || *conflict.Version != 1 {
				t.Errorf("version conflict carries version %v, want 1", conflict.Version)
			}
			e.wantUnchanged(t, before)

			second := ok[result](t, s.RawAppend(t, "invoice", id, []byte(`{"expected_version":1,"events":[{"type":"paid","data":{"amount":1200}}]}`), nil))
			if second.Version != 2 || second.Replayed || len(second.Commands) != 0 {
				t.Errorf("second append = %+v, want version 2", second)
			}

			// The aggregate moved on; a retry of the keyed first append still
			// gets its first result.
			before = e.eventsCount(t)
			retry := ok[result](t, s.RawAppend(t, "invoice", id, []byte(first), nil))
			if !retry.Replayed || retry.DecisionID != res.DecisionID || retry.Seq != res.Seq || retry.Version != 1 {
				t.Errorf("retry = %+v, want the first result (decision %s, seq %d), replayed", retry, res.DecisionID, res.Seq)
			}
			e.wantUnchanged(t, before)

			// The key in the header is the same key as in the body.
			viaHeader := strings.Replace(first, `,"idempotency_key":"issue-1"`, "", 1)
			retry = ok[result](t, s.RawAppend(t, "invoice", id, []byte(viaHeader), idemKey("issue-1")))
			if !retry.Replayed || retry.DecisionID != res.DecisionID {
				t.Errorf("retry with the key as a header = %+v, want decision %s replayed", retry, res.DecisionID)
			}

			reused := `{"expected_version":0,"events":[{"type":"issued","data":{"amount":9999}}],"idempotency_key":"issue-1"}`
			failed(t, s.RawAppend(t, "invoice", id, []byte(reused), nil), http.StatusConflict, "idempotency_key_reused")
			e.wantUnchanged(t, before)

			h := ok[history](t, s.RawEvents(t, "invoice", id))
			if h.AggregateType != "invoice" || h.Version != 2 || len(h.Events) != 2 ||
				h.Events[0].Type != "issued" || h.Events[0].Version != 1 || h.Events[1].Type != "paid" || h.Events[1].Version != 2 {
				t.Fatalf("raw history = %+v, want issued v1 and paid v2", h)
			}
			jsonEqual(t, "issued data", h.Events[0].Data, map[string]any{"amount": 1200, "currency": "EUR"})
			if len(h.Commands) != 1 || h.Commands[0].ID != wantCmd {
				t.Fatalf("raw history commands %+v, want %s", h.Commands, wantCmd)
			}
			jsonEqual(t, "send_invoice payload", h.Commands[0].Payload, map[string]any{"to": "ada@example.com"})

			// The typed routes do not serve an unregistered type.
			if s.Name() == "http" {
				failed(t, s.Events(t, "invoice", id, 0), http.StatusNotFound, "unknown_type")
			}
		})
	}
}

func TestRawAppend_BadRequestsWriteNothing(t *testing.T) {
	t.Parallel()
	e := start(t)
	ok[result](t, e.http.Send(t, trip.Type, "managed", trip.KindRequestTrip, mustJSON(t, request), nil))
	ok[result](t, e.http.RawAppend(t, "invoice", "exists", []byte(`{"expected_version":0,"events":[{"type":"issued"}]}`), nil))

	type tc struct {
		name, typ, id, body string
		status              int
		code                string
	}
	cases := []tc{
		{"registered type", trip.Type, "managed", `{"expected_version":1,"events":[{"type":"trip_confirmed"}]}`, 400, "managed_type"},
		{"registered type, new id", trip.Type, "fresh", `{"expected_version":0,"events":[{"type":"trip_requested"}]}`, 400, "managed_type"},
		{"no events", "invoice", "r1", `{"expected_version":0,"events":[]}`, 400, "invalid_events"},
		{"events missing", "invoice", "r1", `{"expected_version":0}`, 400, "invalid_events"},
		{"only commands", "invoice", "r1", `{"expected_version":0,"events":[],"commands":[{"kind":"send_invoice"}]}`, 400, "invalid_events"},
		{"malformed JSON", "invoice", "r1", `{"expected_version":`, 400, "bad_request"},
		{"unknown field", "invoice", "r1", `{"expected_version":0,"events":[{"type":"issued"}],"extra":1}`, 400, "bad_request"},
		{"wrong field type", "invoice", "r1", `{"expected_version":"zero","events":[{"type":"issued"}]}`, 400, "bad_request"},
		{"trailing data", "invoice", "r1", `{"expected_version":0,"events":[{"type":"issued"}]} {}`, 400, "bad_request"},
		{"event type with a dot", "invoice", "r1", `{"expected_version":0,"events":[{"type":"a.b"}]}`, 400, "invalid_token"},
		{"empty event type", "invoice", "r1", `{"expected_version":0,"events":[{"type":""}]}`, 400, "invalid_token"},
		// A tombstone is esjet's own (docs/archiving.md): a raw append of
		// one, on a new or an existing aggregate, would make loads take its
		// state and history reads follow its archive name.
		{"a forged tombstone", "invoice", "r1", `{"expected_version":0,"events":[{"type":"esjet:archived","data":{"archive":"invoice.exists.1","last_seq":1,"state":{"paid":true}}}]}`, 400, "invalid_token"},
		{"a forged tombstone after a decision", "invoice", "exists", `{"expected_version":1,"events":[{"type":"esjet:archived","data":{"archive":"invoice.r1.1","last_seq":1}}]}`, 400, "invalid_token"},
		{"id longer than 128", "invoice", strings.Repeat("x", 129), `{"expected_version":0,"events":[{"type":"issued"}]}`, 400, "invalid_token"},
		{"expected version ahead", "invoice", "exists", `{"expected_version":5,"events":[{"type":"paid"}]}`, 409, "version_conflict"},
		{"body over the limit", "invoice", "r1", `{"events":[{"type":"issued","data":"` + strings.Repeat("a", maxBody) + `"}]}`, 413, "too_large"},
		{"decision over the limit", "invoice", "r1", `{"expected_version":0,"events":[{"type":"issued","data":"` + strings.Repeat("a", maxBody-100) + `"}]}`, 413, "too_large"},
	}
	for _, s := range e.surfaces() {
		t.Run(s.Name(), func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					before := e.eventsCount(t)
					failed(t, s.RawAppend(t, c.typ, c.id, []byte(c.body), nil), c.status, c.code)
					e.wantUnchanged(t, before)
				})
			}
			t.Run("events of a missing aggregate", func(t *testing.T) {
				failed(t, s.RawEvents(t, "invoice", "nobody"), http.StatusNotFound, "not_found")
			})
		})
	}
	t.Run("http/events of an invalid id", func(t *testing.T) {
		failed(t, e.http.RawEvents(t, "invoice", "a*b"), http.StatusBadRequest, "invalid_token")
	})
	t.Run("raw events serve a registered type too", func(t *testing.T) {
		for _, s := range e.surfaces() {
			h := ok[history](t, s.RawEvents(t, trip.Type, "managed"))
			if len(h.Events) != 1 || h.Events[0].Type != trip.EventTripRequested {
				t.Errorf("%s raw events of trip/managed = %+v, want its trip_requested", s.Name(), h.Events)
			}
		}
	})
}

var semver = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

func TestMicro_DiscoverableAsEsjetServiceWithEveryEndpoint(t *testing.T) {
	t.Parallel()
	e := start(t)
	ping, err := micro.ControlSubject(micro.PingVerb, "esjet", "")
	if err != nil {
		t.Fatal(err)
	}
	info, err := micro.ControlSubject(micro.InfoVerb, "esjet", "")
	if err != nil {
		t.Fatal(err)
	}
	if ping != "$SRV.PING.esjet" || info != "$SRV.INFO.esjet" {
		t.Fatalf("control subjects %s, %s", ping, info)
	}

	m, err := e.nc.Request(ping, nil, replyTimeout)
	if err != nil {
		t.Fatalf("ping: %v", err)
	}
	var p micro.Ping
	if err := json.Unmarshal(m.Data, &p); err != nil {
		t.Fatalf("ping reply %s: %v", m.Data, err)
	}
	if p.Name != "esjet" || !semver.MatchString(p.Version) || p.ID == "" || p.Type != micro.PingResponseType {
		t.Errorf("ping = %+v, want esjet with a semver version and an id", p)
	}

	m, err = e.nc.Request(info, nil, replyTimeout)
	if err != nil {
		t.Fatalf("info: %v", err)
	}
	var in micro.Info
	if err := json.Unmarshal(m.Data, &in); err != nil {
		t.Fatalf("info reply %s: %v", m.Data, err)
	}
	if in.Name != "esjet" || in.Version != esjet.Version || !semver.MatchString(in.Version) || in.ID != p.ID {
		t.Errorf("info = %+v, want esjet version %s (id %s)", in.ServiceIdentity, esjet.Version, p.ID)
	}
	if in.Metadata["namespace"] != ns {
		t.Errorf("metadata %v, want namespace %s", in.Metadata, ns)
	}
	got := map[string]string{}
	for _, ep := range in.Endpoints {
		got[ep.Subject] = ep.QueueGroup
	}
	for _, want := range []string{"esjet.test.trip.*.*", "esjet.test.raw.append.*.*", "esjet.test.raw.events.*.*", "esjet.test.types"} {
		qg, ok := got[want]
		if !ok {
			t.Errorf("endpoints %v lack %s", got, want)
		} else if qg != "esjet-"+ns {
			t.Errorf("endpoint %s queue group %q, want esjet-%s (so several nodes share the load)", want, qg, ns)
		}
	}

	// Stats (esjet's, under "data") count the requests routed to an
	// endpoint, whichever subscription of the queue group received them.
	ok[result](t, e.nats.Send(t, trip.Type, "stats", trip.KindRequestTrip, mustJSON(t, request), nil))
	ok[tripState](t, e.nats.State(t, trip.Type, "stats"))
	var data struct {
		Requests int64 `json:"requests"`
	}
	natstest.Eventually(t, 5*time.Second, func() bool {
		_ = json.Unmarshal(tripEndpointStats(t, e).Data, &data)
		return data.Requests == 2
	})
}

func tripEndpointStats(t *testing.T, e *env) *micro.EndpointStats {
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
	i := slices.IndexFunc(st.Endpoints, func(ep *micro.EndpointStats) bool { return ep.Subject == "esjet.test.trip.*.*" })
	if i < 0 {
		t.Fatalf("stats %+v lack the trip endpoint", st.Endpoints)
	}
	return st.Endpoints[i]
}

// TestMicro_StatsCountErrorReplies: replies leave from worker goroutines, so
// esjet counts requests and errors itself and reports them in the endpoint's
// stats "data".
func TestMicro_StatsCountErrorReplies(t *testing.T) {
	t.Parallel()
	e := start(t)
	failed(t, e.nats.State(t, trip.Type, "nobody"), http.StatusNotFound, "not_found")
	var data struct {
		Requests  int64  `json:"requests"`
		Errors    int64  `json:"errors"`
		LastError string `json:"last_error"`
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ep := tripEndpointStats(t, e)
		_ = json.Unmarshal(ep.Data, &data)
		if data.Requests == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats data %s: the request was not counted", ep.Data)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if data.Errors != 1 || !strings.Contains(data.LastError, "nobody") {
		t.Errorf("after one 404: %+v; want 1 request, 1 error and its message", data)
	}
}

func TestTypes_ListsTripWithEveryCommand(t *testing.T) {
	t.Parallel()
	e := start(t)
	want := []typeInfo{{Type: trip.Type, Commands: trip.Definition().Commands()}}
	for _, c := range []string{trip.KindRequestTrip, trip.KindAddNote} {
		if !slices.Contains(want[0].Commands, c) {
			t.Fatalf("trip.Definition().Commands() = %v lacks %s", want[0].Commands, c)
		}
	}
	for _, s := range e.surfaces() {
		got := ok[[]typeInfo](t, s.Types(t))
		if len(got) != 1 || got[0].Type != want[0].Type || !slices.Equal(got[0].Commands, want[0].Commands) {
			t.Errorf("%s types = %+v, want %+v", s.Name(), got, want)
		}
	}
}

func TestConcurrentCommands_OnOneTripAllLandWithContiguousVersions(t *testing.T) {
	t.Parallel()
	e := start(t)
	const id, workers, each = "busy", 16, 10
	ok[result](t, e.http.Send(t, trip.Type, id, trip.KindRequestTrip, mustJSON(t, request), nil))

	var (
		mu        sync.Mutex
		successes int
		conflicts int
		versions  = map[uint64]bool{}
		wg        sync.WaitGroup
	)
	surfaces := e.surfaces()
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				s := surfaces[(w+i)%2]
				body := fmt.Sprintf(`{"text":"note %d/%d via %s"}`, w, i, s.Name())
				r, err := s.TrySend(t, trip.Type, id, trip.KindAddNote, []byte(body), nil)
				mu.Lock()
				switch {
				case err != nil:
					t.Errorf("%s add_note: %v", s.Name(), err)
				case r.Status == http.StatusOK:
					var res result
					if err := json.Unmarshal(r.Body, &res); err != nil {
						t.Errorf("decode %s: %v", r.Body, err)
					} else if versions[res.Version] {
						t.Errorf("version %d handed out twice", res.Version)
					} else {
						versions[res.Version] = true
					}
					successes++
				case r.Status == http.StatusConflict:
					conflicts++
				default:
					t.Errorf("%s add_note: %d %s, want 200 or 409", s.Name(), r.Status, r.Body)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("%d add_note: %d succeeded, %d conflicts", workers*each, successes, conflicts)
	if successes == 0 {
		t.Fatal("no add_note succeeded")
	}

	for _, s := range surfaces {
		st := ok[tripState](t, s.State(t, trip.Type, id))
		if st.State.Notes != successes || st.Position.Version != uint64(successes)+1 {
			t.Errorf("%s state: %d notes at version %d, want %d notes at version %d",
				s.Name(), st.State.Notes, st.Position.Version, successes, successes+1)
		}
	}
	h := ok[history](t, e.http.do(t, http.MethodGet, "/v1/trip/"+id+"/events?limit=1000", nil, nil))
	if len(h.Events) != successes+1 {
		t.Fatalf("history has %d events, want %d", len(h.Events), successes+1)
	}
	for i, ev := range h.Events {
		if ev.Version != uint64(i)+1 {
			t.Fatalf("event %d has version %d: versions are not contiguous from 1", i, ev.Version)
		}
		if i > 0 && (ev.Type != trip.EventNoteAdded || !versions[ev.Version]) {
			t.Errorf("event v%d is %s, reported to a client: %v; want a note_added some client was told about", ev.Version, ev.Type, versions[ev.Version])
		}
	}
	if got := e.eventsCount(t); got != uint64(successes)+1 {
		t.Errorf("%s holds %d messages, want %d (one per decision)", eventsStream, got, successes+1)
	}
}

// probe is an aggregate type whose Decide functions break the rules in the
// ways the API must still answer sensibly.
type probeState struct{ Events int }

func probeDefinition() *esjet.Definition {
	def := esjet.Define("probe", 1, func(s probeState, _ esjet.Event) probeState { s.Events++; return s })
	esjet.On(def, "touch", func(probeState, struct{}) (esjet.Decision, error) { return esjet.Emit("touched", nil), nil })
	esjet.On(def, "noop", func(probeState, struct{}) (esjet.Decision, error) { return esjet.Nothing(), nil })
	esjet.On(def, "commands_without_event", func(probeState, struct{}) (esjet.Decision, error) {
		return esjet.Decision{}.Fire("ping", nil), nil
	})
	esjet.On(def, "event_type_with_dot", func(probeState, struct{}) (esjet.Decision, error) { return esjet.Emit("a.b", nil), nil })
	esjet.On(def, "reject_silently", func(probeState, struct{}) (esjet.Decision, error) {
		return esjet.Decision{}, esjet.Reject("silent", "")
	})
	esjet.On(def, "plain_error", func(probeState, struct{}) (esjet.Decision, error) {
		return esjet.Decision{}, errors.New("not today")
	})
	return def.Definition()
}

func TestSendCommand_NothingToDoAnswersCurrentVersionAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := start(t, probeDefinition())
	ok[result](t, e.http.Send(t, "probe", "p1", "touch", nil, nil))
	before := e.eventsCount(t)
	for _, s := range e.surfaces() {
		r := s.Send(t, "probe", "p1", "noop", nil, nil)
		res := ok[result](t, r)
		if res.Version != 1 || res.DecisionID != "" || res.Replayed {
			t.Errorf("%s noop = %+v, want version 1 and no decision", s.Name(), res)
		}
		// Empty lists, not null: clients iterate them.
		if !bytes.Contains(r.Body, []byte(`"events":[]`)) && !bytes.Contains(r.Body, []byte(`"events": []`)) {
			t.Errorf("%s noop body %s: events is not an empty list", s.Name(), r.Body)
		}
	}
	e.wantUnchanged(t, before)
}

func TestSendCommand_DomainErrorWithoutCodeIsRejected(t *testing.T) {
	t.Parallel()
	e := start(t, probeDefinition())
	before := e.eventsCount(t)
	for _, s := range e.surfaces() {
		err := failed(t, s.Send(t, "probe", "p1", "plain_error", nil, nil), http.StatusUnprocessableEntity, "rejected")
		if !strings.Contains(err.Message, "not today") {
			t.Errorf("%s message %q, want the domain's error", s.Name(), err.Message)
		}
	}
	e.wantUnchanged(t, before)
}

func TestSendCommand_AggregateBreakingTheContractIsInternalError(t *testing.T) {
	t.Parallel()
	e := start(t, probeDefinition())
	before := e.eventsCount(t)
	for _, s := range e.surfaces() {
		t.Run(s.Name(), func(t *testing.T) {
			// A bug in the aggregate is not the client's fault: 500.
			failed(t, s.Send(t, "probe", "p1", "commands_without_event", nil, nil), http.StatusInternalServerError, "internal")
			t.Run("invalid event type", func(t *testing.T) {
				failed(t, s.Send(t, "probe", "p1", "event_type_with_dot", nil, nil), http.StatusInternalServerError, "internal")
			})
		})
	}
	e.wantUnchanged(t, before)
}

func TestSendCommand_RejectionWithEmptyMessageIsStillAnswered(t *testing.T) {
	t.Parallel()
	e := start(t, probeDefinition())
	r := e.http.Send(t, "probe", "p1", "reject_silently", nil, nil)
	if r.Status != http.StatusUnprocessableEntity {
		t.Errorf("http: %d %s, want 422", r.Status, r.Body)
	}
	t.Run("nats", func(t *testing.T) {
		_, err := e.nats.requestErr(subject("probe", "p1", "reject_silently"), nil, nil)
		if err == nil || errors.Is(err, nats.ErrTimeout) {
			t.Errorf("nats: %v, want a 422 reply", err)
		}
	})
}

func TestRawAppend_RetryWithNewTraceContextReplays(t *testing.T) {
	t.Parallel()
	e := start(t)
	body := []byte(`{"expected_version":0,"events":[{"type":"issued"}]}`)
	first := ok[result](t, e.http.RawAppend(t, "invoice", "tp", body, http.Header{
		"Idempotency-Key": {"tp-1"}, "Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}))
	retry := ok[result](t, e.http.RawAppend(t, "invoice", "tp", body, http.Header{
		"Idempotency-Key": {"tp-1"}, "Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"}}))
	if !retry.Replayed || retry.DecisionID != first.DecisionID {
		t.Errorf("retry = %+v, want decision %s replayed", retry, first.DecisionID)
	}
}

func TestSendCommand_RetryWithNewTraceContextReplays(t *testing.T) {
	t.Parallel()
	e := start(t)
	first := ok[result](t, e.http.Send(t, trip.Type, "tp", trip.KindRequestTrip, mustJSON(t, request), http.Header{
		"Idempotency-Key": {"tp-1"}, "Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}))
	retry := ok[result](t, e.http.Send(t, trip.Type, "tp", trip.KindRequestTrip, mustJSON(t, request), http.Header{
		"Idempotency-Key": {"tp-1"}, "Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"}}))
	if !retry.Replayed || retry.DecisionID != first.DecisionID {
		t.Errorf("retry = %+v, want decision %s replayed", retry, first.DecisionID)
	}
}

func TestHTTP_ChunkedBodyOverLimitReportsALength(t *testing.T) {
	t.Parallel()
	e := start(t)
	body := io.MultiReader(strings.NewReader(`{"traveler":"`), strings.NewReader(strings.Repeat("a", maxBody)))
	err := failed(t, e.http.do(t, http.MethodPost, "/v1/trip/c1/request_trip", body, nil), http.StatusRequestEntityTooLarge, "too_large")
	if strings.Contains(err.Message, "-1 bytes") {
		t.Errorf("message %q reports a length of -1", err.Message)
	}
}

package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/esjettest"
	"github.com/esjet/esjet/internal/console"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/ops"
)

// tripHandlers carry out the trip's commands in Go: every booking succeeds
// but flights to Atlantis, which fail terminally ("no seats").
func tripHandlers() map[string]esjet.Handler {
	ok := esjet.HandlerFunc(func(ctx context.Context, d esjet.Delivery) (json.RawMessage, error) {
		return json.RawMessage(`{"booking_ref":"REF-1"}`), nil
	})
	flights := esjet.HandlerFunc(func(ctx context.Context, d esjet.Delivery) (json.RawMessage, error) {
		if strings.Contains(string(d.Payload), "Atlantis") {
			return nil, esjet.Terminal(errors.New("no seats"))
		}
		return json.RawMessage(`{"booking_ref":"FL-1"}`), nil
	})
	h := map[string]esjet.Handler{trip.KindBookFlight: flights}
	for _, k := range []string{trip.KindLockBudget, trip.KindBookHotel, trip.KindReleaseBudget, trip.KindCancelFlight, trip.KindCancelHotel} {
		h[k] = ok
	}
	return h
}

func startNode(t *testing.T, allowActions bool, handlers map[string]esjet.Handler) string {
	t.Helper()
	cfg := esjettest.Config(t)
	cfg.Console.AllowActions = allowActions
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	n, err := esjet.Start(ctx, esjet.Options{Config: cfg, Aggregates: []*esjet.Definition{trip.Definition()}, Handlers: handlers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = n.Close(ctx)
	})
	return "http://" + n.HTTPAddr()
}

func request(t *testing.T, method, url, contentType, body string, v any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, url, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode
}

func sendTrip(t *testing.T, base, id, destination string) {
	t.Helper()
	body := `{"traveler":"ada","destination":"` + destination + `","budget":100000,"flight_price":40000,"hotel_price":30000}`
	if code := request(t, "POST", base+"/v1/trip/"+id+"/request_trip", "application/json", body, nil); code != 200 {
		t.Fatalf("request_trip %s: %d", id, code)
	}
}

type apiError struct {
	Error struct{ Code, Message string } `json:"error"`
}

// fates maps each command id of the timeline to its fate.
func fates(tl console.Timeline) map[string]string {
	out := map[string]string{}
	for _, d := range tl.Decisions {
		for _, c := range d.Commands {
			out[c.ID] = c.Fate
		}
	}
	return out
}

// kindFates maps each command kind of the timeline to its fate (the ids of
// compensations depend on which booking answered first).
func kindFates(tl console.Timeline) map[string]string {
	out := map[string]string{}
	for _, d := range tl.Decisions {
		for _, c := range d.Commands {
			out[c.Kind] = c.Fate
		}
	}
	return out
}

func timeline(t *testing.T, base, id string) console.Timeline {
	t.Helper()
	var tl console.Timeline
	if code := request(t, "GET", base+"/console/api/aggregates/trip/"+id, "", "", &tl); code != 200 {
		t.Fatalf("timeline of %s: %d", id, code)
	}
	return tl
}

// TestTimelineFollowsTheSaga: a confirmed trip's commands are all done,
// each decision that came back from a worker names the command it
// answered; an Atlantis trip's book_flight is dead with its error and the
// failure it reported, and its compensations are done.
func TestTimelineFollowsTheSaga(t *testing.T) {
	t.Parallel()
	base := startNode(t, false, tripHandlers())
	sendTrip(t, base, "t1", "Lisbon")
	sendTrip(t, base, "t2", "Atlantis")
	var tl console.Timeline
	natstest.Eventually(t, 15*time.Second, func() bool {
		tl = timeline(t, base, "t1")
		return strings.Contains(string(tl.State), `"confirmed"`) && tl.Open == 0
	})
	want := map[string]string{"trip:t1:1:0": console.FateDone, "trip:t1:2:0": console.FateDone, "trip:t1:2:1": console.FateDone}
	if got := fates(tl); !maps.Equal(got, want) {
		t.Errorf("t1 fates %v, want %v", got, want)
	}
	outcomes := 0
	for _, d := range tl.Decisions {
		if d.OutcomeOf != nil {
			outcomes++
			if d.OutcomeOf.Outcome != "done" {
				t.Errorf("decision %d: outcome %+v, want done", d.Seq, d.OutcomeOf)
			}
		}
	}
	if outcomes != 3 {
		t.Errorf("t1 has %d outcome decisions, want 3", outcomes)
	}

	natstest.Eventually(t, 15*time.Second, func() bool {
		tl = timeline(t, base, "t2")
		return strings.Contains(string(tl.State), `"cancelled"`) && tl.Open == 0
	})
	want = map[string]string{trip.KindLockBudget: console.FateDone, trip.KindBookFlight: console.FateDead, trip.KindBookHotel: console.FateDone,
		trip.KindReleaseBudget: console.FateDone, trip.KindCancelHotel: console.FateDone}
	if got := kindFates(tl); !maps.Equal(got, want) {
		t.Errorf("t2 fates %v, want %v", got, want)
	}
	for _, d := range tl.Decisions {
		for _, c := range d.Commands {
			if c.ID != "trip:t2:2:0" {
				continue
			}
			if !strings.Contains(c.Detail, "no seats") || c.Info == nil || len(c.Info.Reported) != 1 || c.Info.Reported[0].Outcome != "failed" {
				t.Errorf("book_flight of t2: detail %q, info %+v; want no seats, reported failed", c.Detail, c.Info)
			}
		}
	}
}

// TestPendingWhenNoWorkerServesTheKind: a command nothing serves waits in
// OUTBOX: pending on the timeline (an open command), stalled on the
// overview, which lists the namespace's streams and buckets and is shared
// by the pages that ask within two seconds.
func TestPendingWhenNoWorkerServesTheKind(t *testing.T) {
	t.Parallel()
	base := startNode(t, false, nil)
	sendTrip(t, base, "t1", "Lisbon")
	var tl console.Timeline
	natstest.Eventually(t, 10*time.Second, func() bool {
		tl = timeline(t, base, "t1")
		return fates(tl)["trip:t1:1:0"] == console.FatePending
	})
	if tl.Open != 1 {
		t.Errorf("open commands %d, want 1", tl.Open)
	}
	var ov console.Overview
	if code := request(t, "GET", base+"/console/api/overview", "", "", &ov); code != 200 {
		t.Fatalf("overview: %d", code)
	}
	var again console.Overview
	if request(t, "GET", base+"/console/api/overview", "", "", &again); !again.Time.Equal(ov.Time) {
		t.Errorf("a second overview right after the first was computed again (%s, then %s): open pages should share one", ov.Time, again.Time)
	}
	if len(ov.Projections) != 0 || !strings.Contains(ov.Note, "no read models") {
		t.Errorf("projections %+v, note %q; want none, and a note saying so", ov.Projections, ov.Note)
	}
	if len(ov.Kinds) != 1 || ov.Kinds[0].Kind != trip.KindLockBudget || !ov.Kinds[0].Stalled {
		t.Errorf("kinds %+v, want lock_budget stalled", ov.Kinds)
	}
	names := map[string]bool{}
	for _, s := range ov.Streams {
		names[s.Name] = true
		if s.Retention.Kept == "" || s.Retention.Why == "" {
			t.Errorf("overview stream %s shows no retention: %+v", s.Name, s.Retention)
		}
	}
	for _, s := range []string{"TEST_EVENTS", "TEST_OUTBOX", "TEST_DLQ", "KV_test_receipts", "KV_test_snapshots"} {
		if !names[s] {
			t.Errorf("overview streams %v lack %s", names, s)
		}
	}
}

// TestDLQActions: with actions allowed, a retry of a letter whose trip was
// told book_flight_failed is refused (409) and changes nothing; after_failed
// re-drives it (it dies again); a discard without a reason is refused; with
// one it settles the letter; both leave audit records naming the console.
func TestDLQActions(t *testing.T) {
	t.Parallel()
	base := startNode(t, true, tripHandlers())
	sendTrip(t, base, "t2", "Atlantis")
	var list console.DeadLetters
	natstest.Eventually(t, 15*time.Second, func() bool {
		request(t, "GET", base+"/console/api/dlq", "", "", &list)
		return len(list.Letters) == 1
	})
	first := list.Letters[0]
	url := base + "/console/api/dlq/" + itoa(first.Seq)

	// The worker reports the failure to the trip before it writes the
	// letter, so a letter on the list is one the trip was told of: the
	// refusal below needs that.
	var evs json.RawMessage
	request(t, "GET", base+"/v1/trip/t2/events", "", "", &evs)
	if !strings.Contains(string(evs), `"flight_failed"`) {
		t.Fatalf("a dead letter is listed before the trip was told the failure: %s", evs)
	}
	var e apiError
	if code := request(t, "POST", url+"/retry", "text/plain", `{}`, &e); code != 415 || e.Error.Code != "unsupported_media_type" || !strings.Contains(e.Error.Message, "application/json") {
		t.Errorf("retry as text/plain: %d %+v, want 415 asking for application/json", code, e)
	}
	if code := request(t, "POST", url+"/discard", "application/json", `{"reason":"a","reason":"b"}`, &e); code != 400 || e.Error.Code != "duplicate_key" || !strings.Contains(e.Error.Message, `"reason"`) {
		t.Errorf("discard with a key twice: %d %+v, want 400 duplicate_key", code, e)
	}
	if code := request(t, "POST", url+"/retry", "application/json", `{"command_id":"trip:t2:2:0"}`, &e); code != 409 || e.Error.Code != "reported_failure" {
		t.Fatalf("retry: %d %+v, want 409 reported_failure", code, e)
	}
	if code := request(t, "POST", url+"/retry", "application/json", `{"command_id":"trip:t9:2:0","after_failed":true}`, &e); code != 404 {
		t.Errorf("retry naming another command: %d %+v, want 404", code, e)
	}
	var rep ops.ActionReply
	if code := request(t, "POST", url+"/retry", "application/json", `{"command_id":"trip:t2:2:0","after_failed":true}`, &rep); code != 200 || rep.Action != ops.AuditRetried {
		t.Fatalf("retry after_failed: %d %+v", code, rep)
	}
	if !strings.HasPrefix(rep.By, "console at ") {
		t.Errorf("retried by %q, want console at <address>", rep.By)
	}
	natstest.Eventually(t, 15*time.Second, func() bool {
		request(t, "GET", base+"/console/api/dlq", "", "", &list)
		return len(list.Letters) == 1 && list.Letters[0].Seq != first.Seq
	})
	second := base + "/console/api/dlq/" + itoa(list.Letters[0].Seq)
	if code := request(t, "POST", second+"/discard", "application/json", `{"reason":"  "}`, &e); code != 400 {
		t.Errorf("discard without a reason: %d %+v, want 400", code, e)
	}
	if code := request(t, "POST", second+"/discard", "application/json", `{"reason":"Atlantis has no airport"}`, &rep); code != 200 || rep.Action != ops.AuditDiscarded {
		t.Fatalf("discard: %d %+v", code, rep)
	}
	var det console.DeadLetterDetail
	if code := request(t, "GET", second, "", "", &det); code != 200 || det.Settled == nil || det.Settled.Reason != "Atlantis has no airport" || len(det.History) != 2 {
		t.Errorf("discarded letter: %d settled %+v, %d audit records; want discarded with the reason, 2 records", code, det.Settled, len(det.History))
	}
	tl := timeline(t, base, "t2")
	if f := fates(tl)["trip:t2:2:0"]; f != console.FateDiscarded {
		t.Errorf("book_flight's fate after the discard: %q, want discarded", f)
	}
	// The page shows the detail and then each history record: the discard
	// is said once, by its record, and the detail keeps what failed.
	for _, d := range tl.Decisions {
		for _, c := range d.Commands {
			if c.ID != "trip:t2:2:0" {
				continue
			}
			said := 0
			for _, a := range c.History {
				if a.Action == ops.AuditDiscarded {
					said++
				}
			}
			if strings.Contains(c.Detail, "discarded") || said != 1 || !strings.Contains(c.Detail, "no seats") {
				t.Errorf("discarded book_flight: detail %q and %d discard record(s); want the error in the detail and the discard once, in the history", c.Detail, said)
			}
		}
	}
}

// Every page of the console names its namespace in the header, also one
// opened by a link (the page carries it; no view has to poll for it).
func TestConsolePageNamesItsNamespace(t *testing.T) {
	t.Parallel()
	base := startNode(t, false, tripHandlers())
	resp, err := http.Get(base + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `<span id="namespace" class="ns">namespace `) {
		t.Errorf("GET /console/ does not name the namespace in its header:\n%s", body)
	}
}

// TestActionsOffUnlessAllowed: the default console only reads.
func TestActionsOffUnlessAllowed(t *testing.T) {
	t.Parallel()
	base := startNode(t, false, tripHandlers())
	var e apiError
	if code := request(t, "POST", base+"/console/api/dlq/1/discard", "application/json", `{"reason":"x"}`, &e); code != 403 || e.Error.Code != "actions_disabled" {
		t.Errorf("discard with actions off: %d %+v, want 403 actions_disabled", code, e)
	}
	if code := request(t, "GET", base+"/console/api/nosuch", "", "", &e); code != 404 || e.Error.Code != "no_route" {
		t.Errorf("unknown console route: %d %+v, want 404 no_route", code, e)
	}
	if code := request(t, "GET", base+"/console/api/aggregates/trip/nosuch", "", "", &e); code != 404 || e.Error.Code != "not_found" {
		t.Errorf("timeline of a trip with no events: %d %+v, want 404 not_found", code, e)
	}
	if code := request(t, "GET", base+"/console/api/aggregates/a.b", "", "", &e); code != 400 {
		t.Errorf("ids of type a.b: %d %+v, want 400", code, e)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", base+"/console/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "/console/assets/console.js") {
		t.Errorf("GET /console/: %d, want the page", resp.StatusCode)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

package console_test

import (
	"testing"

	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/internal/console"
)

// TestPauseAndResumeAKind pauses a kind from the console, sees it paused
// in the overview (by whom, why), and resumes it; with actions off, or
// with bad input, nothing changes.
func TestPauseAndResumeAKind(t *testing.T) {
	t.Parallel()
	off := startNode(t, false, tripHandlers())
	var e apiError
	if code := request(t, "POST", off+"/console/api/workers/book_flight/pause", "application/json", `{"reason":"x"}`, &e); code != 403 || e.Error.Code != "actions_disabled" {
		t.Errorf("pause with actions off: %d %+v, want 403 actions_disabled", code, e)
	}

	base := startNode(t, true, tripHandlers())
	for _, bad := range []struct{ path, body string }{
		{"/console/api/workers/book_flight/stop", `{}`},
		{"/console/api/workers/a%2Eb/pause", `{}`},
		{"/console/api/workers/book_flight/pause", `{"why":"x"}`},
	} {
		if code := request(t, "POST", base+bad.path, "application/json", bad.body, &e); code != 400 {
			t.Errorf("POST %s %s: %d %+v, want 400", bad.path, bad.body, code, e)
		}
	}
	var rec struct {
		Paused bool   `json:"paused"`
		By     string `json:"by"`
	}
	if code := request(t, "POST", base+"/console/api/workers/"+trip.KindBookFlight+"/pause", "application/json", `{"reason":"supplier down"}`, &rec); code != 200 || !rec.Paused || rec.By != "console at 127.0.0.1" {
		t.Fatalf("pause: %d %+v", code, rec)
	}
	if code := request(t, "POST", base+"/console/api/workers/"+trip.KindBookFlight+"/pause", "application/json", `{}`, &e); code != 409 {
		t.Errorf("a second pause: %d %+v, want 409", code, e)
	}
	var ov console.Overview
	if code := request(t, "GET", base+"/console/api/overview", "", "", &ov); code != 200 {
		t.Fatalf("overview: %d", code)
	}
	found := false
	for _, w := range ov.Workers {
		if w.Kind == trip.KindBookFlight {
			found = w.Paused && w.Reason == "supplier down" && w.By == "console at 127.0.0.1"
		}
	}
	if !found {
		t.Fatalf("overview's workers after the pause: %+v", ov.Workers)
	}
	if code := request(t, "POST", base+"/console/api/workers/"+trip.KindBookFlight+"/resume", "application/json", `{}`, &rec); code != 200 || rec.Paused {
		t.Fatalf("resume: %d %+v", code, rec)
	}
}

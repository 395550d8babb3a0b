package api_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/demo/trip"
)

// TestSendOutcome_RefusedOnBothSurfacesAndWritesNothing is issue 11 item 2:
// a client posting book_flight_done with a made-up command id confirmed a
// trip with booking FAKE-123. Outcomes are reported by workers only: both
// surfaces answer 403 outcome_not_sendable, even for the right command id,
// and write nothing.
func TestSendOutcome_RefusedOnBothSurfacesAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := start(t)
	for _, s := range e.surfaces() {
		t.Run(s.Name(), func(t *testing.T) {
			id := "forged-" + s.Name()
			ok[result](t, s.Send(t, trip.Type, id, trip.KindRequestTrip, mustJSON(t, request), nil))
			before := e.eventsCount(t)
			for _, c := range []struct{ kind, commandID string }{
				{esjet.DoneKind(trip.KindBookFlight), "trip:" + id + ":9:0"},
				{esjet.DoneKind(trip.KindLockBudget), "trip:" + id + ":1:0"}, // the real one
				{esjet.FailedKind(trip.KindLockBudget), "trip:" + id + ":1:0"},
			} {
				body := mustJSON(t, esjet.Outcome{CommandID: c.commandID, Result: []byte(`{"booking_ref":"FAKE-123"}`)})
				e := failed(t, s.Send(t, trip.Type, id, c.kind, body, idemKey(c.commandID+"/done")), http.StatusForbidden, "outcome_not_sendable")
				if !strings.Contains(e.Message, c.kind) || !strings.Contains(e.Message, trip.KindRequestTrip) {
					t.Errorf("%s: message %q should name the outcome and the commands to send instead", c.kind, e.Message)
				}
			}
			e.wantUnchanged(t, before)
		})
	}
}

// TestTypes_ListsNoOutcomeAsACommand: GET /v1/types (and micro) offer only
// what a client may send.
func TestTypes_ListsNoOutcomeAsACommand(t *testing.T) {
	t.Parallel()
	e := start(t)
	for _, s := range e.surfaces() {
		got := ok[[]typeInfo](t, s.Types(t))
		if len(got) != 1 || !slices.Equal(got[0].Commands, []string{trip.KindAddNote, trip.KindRequestTrip}) {
			t.Errorf("%s types = %+v, want trip with add_note and request_trip only", s.Name(), got)
		}
	}
}

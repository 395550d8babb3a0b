package api_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/esjet/esjet/demo/trip"
)

// pageOf reads one history page on s: HTTP ?after=&limit=, NATS headers.
func pageOf(t *testing.T, s surface, id string, after uint64, limit int) reply {
	t.Helper()
	switch s := s.(type) {
	case *httpSurface:
		return s.do(t, http.MethodGet, "/v1/trip/"+id+"/events?after="+strconv.FormatUint(after, 10)+"&limit="+strconv.Itoa(limit), nil, nil)
	case *natsSurface:
		return s.request(t, subject(trip.Type, id, "events"), nil, http.Header{
			"Esjet-After-Version": {strconv.FormatUint(after, 10)}, "Esjet-Limit": {strconv.Itoa(limit)}})
	}
	t.Fatalf("surface %T", s)
	return reply{}
}

type page struct {
	history
	NextAfter uint64 `json:"next_after"`
}

func TestHistory_PagedWithACursorOnBothSurfaces(t *testing.T) {
	t.Parallel()
	e := start(t)
	const id = "paged"
	ok[result](t, e.http.Send(t, trip.Type, id, trip.KindRequestTrip, mustJSON(t, request), nil))
	for i := range 6 {
		ok[result](t, e.nats.Send(t, trip.Type, id, trip.KindAddNote, []byte(`{"text":"n`+strconv.Itoa(i)+`"}`), nil))
	}
	for _, s := range e.surfaces() {
		var versions []uint64
		var after uint64
		pages := 0
		for {
			p := ok[page](t, pageOf(t, s, id, after, 3))
			pages++
			if len(p.Events) > 3 {
				t.Fatalf("%s: a page of limit 3 has %d events", s.Name(), len(p.Events))
			}
			if p.Version != 7 {
				t.Errorf("%s: page reports version %d, want the aggregate's 7", s.Name(), p.Version)
			}
			for _, ev := range p.Events {
				versions = append(versions, ev.Version)
			}
			if p.NextAfter == 0 {
				break
			}
			after = p.NextAfter
		}
		if pages != 3 || len(versions) != 7 {
			t.Errorf("%s: %d pages, versions %v; want 3 pages of 1..7", s.Name(), pages, versions)
		}
		for i, v := range versions {
			if v != uint64(i)+1 {
				t.Fatalf("%s: versions %v are not 1..7 in order", s.Name(), versions)
			}
		}
		// The request_trip decision's command (lock_budget) comes with its page.
		first := ok[page](t, pageOf(t, s, id, 0, 1))
		if len(first.Commands) != 1 || first.Commands[0].Kind != trip.KindLockBudget || first.NextAfter != 1 {
			t.Errorf("%s: first page %+v, want lock_budget and next_after 1", s.Name(), first)
		}
	}
}

func TestHistory_DefaultAndMaximumPage(t *testing.T) {
	t.Parallel()
	e := start(t)
	const id = "long"
	ok[result](t, e.http.Send(t, trip.Type, id, trip.KindRequestTrip, mustJSON(t, request), nil))
	for i := range 104 {
		ok[result](t, e.http.Send(t, trip.Type, id, trip.KindAddNote, []byte(`{"text":"n`+strconv.Itoa(i)+`"}`), nil))
	}
	for _, s := range e.surfaces() {
		p := ok[page](t, s.Events(t, trip.Type, id, 0))
		if len(p.Events) != 100 || p.NextAfter != 100 {
			t.Errorf("%s: default page has %d events, next_after %d; want 100 and 100", s.Name(), len(p.Events), p.NextAfter)
		}
		p = ok[page](t, s.Events(t, trip.Type, id, 100))
		if len(p.Events) != 5 || p.NextAfter != 0 {
			t.Errorf("%s: last page has %d events, next_after %d; want 5 and none", s.Name(), len(p.Events), p.NextAfter)
		}
		for _, limit := range []int{0, 1001} {
			failed(t, pageOf(t, s, id, 0, limit), 400, "bad_request")
		}
	}
	// NATS: a JSON body says the same as the headers.
	p := ok[page](t, e.nats.request(t, subject(trip.Type, id, "events"), []byte(`{"after":3,"limit":2}`), nil))
	if len(p.Events) != 2 || p.Events[0].Version != 4 || p.NextAfter != 5 {
		t.Errorf("body-paged read: %+v", p)
	}
	failed(t, e.nats.request(t, subject(trip.Type, id, "events"), []byte(`{"from":3}`), nil), 400, "bad_request")
}

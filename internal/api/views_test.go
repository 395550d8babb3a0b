package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/esjettest"
	"github.com/esjet/esjet/internal/natstest"
)

type viewDoc struct {
	View       string          `json:"view"`
	Key        string          `json:"key"`
	Value      json.RawMessage `json:"value"`
	Generation int             `json:"generation"`
	Position   uint64          `json:"position"`
}

// TestViewQueriesOnBothSurfaces: a document read after a command's
// position holds the command's event, on HTTP and NATS; listings page by
// prefix; a paused view answers a wait 503 at once; errors have the API's
// shape.
func TestViewQueriesOnBothSurfaces(t *testing.T) {
	t.Parallel()
	cfg := esjettest.Config(t)
	cfg.Demo.Services = false
	n, err := esjet.Start(t.Context(), esjet.Options{Config: cfg, Aggregates: []*esjet.Definition{trip.Definition()}, Projections: trip.Views()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	nc, err := nats.Connect(n.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	h, nt := &httpSurface{base: "http://" + n.HTTPAddr()}, &natsSurface{nc: nc}
	var pos uint64
	for _, id := range []string{"t1", "t2", "t3"} {
		res := ok[struct {
			Position uint64 `json:"position"`
		}](t, h.Send(t, "trip", id, "request_trip", []byte(`{"traveler":"ada","destination":"Oslo","budget":1000,"flight_price":400,"hotel_price":300}`), nil))
		pos = res.Position
	}
	p := strconv.FormatUint(pos, 10)
	doc := ok[viewDoc](t, h.do(t, http.MethodGet, "/v1/views/trips_by_status/trip/t3?after="+p+"&wait=5s", nil, nil))
	if doc.Key != "trip/t3" || doc.Position < pos || doc.Generation != 1 {
		t.Fatalf("http read after %d: %+v", pos, doc)
	}
	doc = ok[viewDoc](t, nt.request(t, "esjet."+ns+".views.trips_by_status.get", []byte(`{"key":"trip/t3","after":`+p+`,"wait":"5s"}`), nil))
	if doc.Key != "trip/t3" || doc.Position < pos {
		t.Fatalf("nats read after %d: %+v", pos, doc)
	}
	type page struct {
		Docs   []viewDoc `json:"docs"`
		Cursor string    `json:"cursor"`
	}
	first := ok[page](t, h.do(t, http.MethodGet, "/v1/views/trips_by_status?prefix=trip/&limit=2", nil, nil))
	if len(first.Docs) != 2 || first.Cursor != "trip/t2" {
		t.Fatalf("first page: %+v", first)
	}
	next := ok[page](t, nt.request(t, "esjet."+ns+".views.trips_by_status.list", []byte(`{"prefix":"trip/","limit":2,"cursor":"trip/t2"}`), nil))
	if len(next.Docs) != 1 || next.Docs[0].Key != "trip/t3" || next.Cursor != "" {
		t.Fatalf("second page: %+v", next)
	}
	failed(t, h.do(t, http.MethodGet, "/v1/views/nosuch/k", nil, nil), 404, "unknown_view")
	failed(t, h.do(t, http.MethodGet, "/v1/views/trips_by_status/events", nil, nil), 404, "not_found")
	failed(t, h.do(t, http.MethodGet, "/v1/views/trips_by_status/trip/t1?wait=forever", nil, nil), 400, "bad_request")
	// An operator pauses the view: a wait past its position fails at once.
	ok[json.RawMessage](t, nt.request(t, "esjet."+ns+".ops.oncall.projections.pause", []byte(`{"name":"trips_by_status"}`), nil))
	natstest.Eventually(t, 10*time.Second, func() bool {
		var sts []struct {
			Name  string `json:"name"`
			Parts []struct {
				State string `json:"state"`
			} `json:"parts"`
		}
		_ = json.Unmarshal(nt.request(t, "esjet."+ns+".views", nil, nil).Body, &sts)
		for _, st := range sts {
			if st.Name == "trips_by_status" && len(st.Parts) > 0 && st.Parts[0].State == "paused" {
				return true
			}
		}
		return false
	})
	later := ok[struct {
		Position uint64 `json:"position"`
	}](t, h.Send(t, "trip", "t4", "request_trip", []byte(`{"traveler":"bob","destination":"Oslo","budget":1000,"flight_price":400,"hotel_price":300}`), nil))
	start := time.Now()
	failed(t, h.do(t, http.MethodGet, "/v1/views/trips_by_status/trip/t4?after="+strconv.FormatUint(later.Position, 10)+"&wait=20s", nil, nil), 503, "view_stopped")
	if time.Since(start) > 10*time.Second {
		t.Fatalf("a wait on a paused view took %s: it must fail at once", time.Since(start))
	}
	ok[json.RawMessage](t, nt.request(t, "esjet."+ns+".ops.oncall.projections.resume", []byte(`{"name":"trips_by_status"}`), nil))
	ok[viewDoc](t, h.do(t, http.MethodGet, "/v1/views/trips_by_status/trip/t4?after="+strconv.FormatUint(later.Position, 10)+"&wait=10s", nil, nil))
}

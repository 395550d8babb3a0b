package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/api"
)

// config keeps its own copy of the route words (it imports nothing of
// esjet): every word the API routes on is refused there as a raw type.
func TestRouteWords_ConfigRefusesEachAsARawType(t *testing.T) {
	t.Parallel()
	for _, word := range api.RouteWords {
		c := config.Default()
		c.Aggregates.Raw = map[string]config.RawType{word: {}}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "route words") {
			t.Errorf("aggregates.raw.%s: Validate() = %v, want a route word error", word, err)
		}
	}
}

// A raw append to a type that is a route word is refused on both
// surfaces, even where aggregates.raw does not list it, and writes nothing.
func TestRawAppend_ToARouteWordTypeIsRefused(t *testing.T) {
	t.Parallel()
	e := start(t)
	before := e.eventsCount(t)
	for _, s := range e.surfaces() {
		for _, word := range []string{"state", "ops", "multi"} {
			failed(t, s.RawAppend(t, word, "x1", []byte(`{"events":[{"type":"happened"}]}`), nil), 400, "route_word")
		}
	}
	failed(t, e.http.do(t, http.MethodPost, "/v1/raw/views/x1/events", strings.NewReader(`{"events":[{"type":"happened"}]}`), nil), 400, "route_word")
	e.wantUnchanged(t, before)
}

package esjet_test

import (
	"strings"
	"testing"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/esjettest"
)

// A Go caller of package esjet gets the clear error for a bad aggregate id
// from every entry point that takes one — the id is validated once, where
// the request comes in, not at each layer below — and nothing is written.
func TestABadAggregateIDIsRefusedByEveryGoEntryPoint(t *testing.T) {
	n := esjettest.Start(t, counter())
	ctx := t.Context()
	for _, id := range []string{"", "c.1", "*", ">", "c 1", strings.Repeat("c", 129)} {
		_, sendErr := n.Send(ctx, "counter", id, "add", Add{By: 1}, esjet.WithIdempotencyKey("k-"+id))
		_, allErr := n.SendAll(ctx, []esjet.MultiCommand{{Type: "counter", ID: id, Kind: "add", Payload: Add{By: 1}}})
		_, _, stateErr := n.State(ctx, "counter", id)
		_, eventsErr := n.Events(ctx, "counter", id)
		for name, err := range map[string]error{"Send": sendErr, "SendAll": allErr, "State": stateErr, "Events": eventsErr} {
			if err == nil || !strings.Contains(err.Error(), "invalid aggregate id") {
				t.Errorf("%s with id %q: %v, want the invalid aggregate id error", name, id, err)
			}
		}
	}
	if events, _, err := n.ReadLog(ctx, 0, 10); err != nil || len(events) != 0 {
		t.Errorf("the log after bad ids only: %d events (%v), want none", len(events), err)
	}
}

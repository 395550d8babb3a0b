package main

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// esjet streams lists the buckets made on demand (read models, their
// leases) once they exist, and no other namespace's.
func TestStreamsListsTheReadModelBuckets(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	for _, b := range []string{"shop_view_orders", "shop_projections", "other_view_orders"} {
		if _, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: b}); err != nil {
			t.Fatal(err)
		}
	}
	reports, err := collectStreams(t.Context(), js, streams.NamesFor("shop"), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range reports {
		if r.Exists {
			got[r.Name] = r.Role
			if r.Retention.Kept == "" || r.Retention.Why == "" {
				t.Errorf("%s: no retention shown (%+v)", r.Name, r.Retention)
			}
		}
	}
	if got["KV_shop_view_orders"] != "read model (KV)" || got["KV_shop_projections"] != "projection leases (KV)" {
		t.Errorf("streams %v, want the shop view and leases buckets listed", got)
	}
	if _, ok := got["KV_other_view_orders"]; ok {
		t.Errorf("streams %v list another namespace's view", got)
	}
}

package main

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// esjet streams lists the buckets made on demand (read models, their
// leases, the workers' control, the data keys, the archive) once they
// exist, and no other namespace's.
func TestStreamsListsTheReadModelBuckets(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	for _, b := range []string{"shop_view_orders", "shop_projections", "other_view_orders", "shop_workers", "shop_keys"} {
		if _, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: b}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.CreateObjectStore(t.Context(), jetstream.ObjectStoreConfig{Bucket: "shop_archive"}); err != nil {
		t.Fatal(err)
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
	for name, role := range map[string]string{"KV_shop_view_orders": "read model (KV)", "KV_shop_projections": "projection leases (KV)",
		"KV_shop_workers": "workers' control (KV)", "KV_shop_keys": "data keys (KV)", "OBJ_shop_archive": "archive"} {
		if got[name] != role {
			t.Errorf("streams %v, want %s listed as %q", got, name, role)
		}
	}
	if _, ok := got["KV_other_view_orders"]; ok {
		t.Errorf("streams %v list another namespace's view", got)
	}
}

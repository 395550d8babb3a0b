package broker

import (
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/esjet/esjet/internal/projection"
	"github.com/esjet/esjet/internal/wire"
)

func TestBrokerKnowsTheViewBucketNames(t *testing.T) {
	for gen := 1; gen <= 7; gen++ {
		if b := projection.ViewBucket("trips", "spend", gen); !slices.Contains(wire.ViewBuckets("trips", "spend"), b) {
			t.Errorf("generation %d is in %s, which no role names", gen, b)
		}
	}
}

func viewPerms(t *testing.T, role string) *server.Permissions {
	t.Helper()
	p, err := RolePermissions(role, RoleSpec{Namespace: "trips", Views: []string{"by_status", "spend"}, Subject: "billing.charge", Bucket: "billing_keys", User: "oncall"})
	if err != nil {
		t.Fatalf("RolePermissions(%s): %v", role, err)
	}
	return p
}

// TestOnlyTheNodeWritesTheViews: the node owns its views' buckets (every
// generation's, and the control bucket) and may purge a view's bucket (a
// rebuild, a reset) but no other stream; the client queries views through
// the API, the operator reads them; neither writes them, nor does a
// receiver.
func TestOnlyTheNodeWritesTheViews(t *testing.T) {
	writes := []string{"$KV.trips_view_by_status.pending", "$KV.trips_view_by_status-b.pending", "$KV.trips_view_spend-c.ada",
		"$KV.trips_projections.spend.g1.p0.lease", "$KV.trips_projections.spend.ctl"}
	node := viewPerms(t, RoleNode)
	for _, s := range append(writes, "$JS.API.STREAM.CREATE.KV_trips_view_spend-c",
		"$JS.API.STREAM.CREATE.KV_trips_projections", "$JS.API.CONSUMER.CREATE.KV_trips_view_by_status-b.x.$KV.trips_view_by_status-b.>",
		"$JS.API.DIRECT.GET.KV_trips_view_spend.$KV.trips_view_spend.ada",
		"$JS.API.STREAM.PURGE.KV_trips_view_spend", "$JS.API.STREAM.PURGE.KV_trips_view_by_status-c") {
		if !allowed(node.Publish, s, "") {
			t.Errorf("node may not publish %s", s)
		}
	}
	for _, s := range append(slices.Clone(destructiveRequests), "$JS.API.STREAM.PURGE.KV_trips_projections", "$JS.API.STREAM.PURGE.TRIPS_DLQ",
		"$JS.API.STREAM.PURGE.KV_trips_snapshots", "$JS.API.STREAM.DELETE.KV_trips_view_spend", "$KV.trips_view_other.x",
		"$JS.API.STREAM.PURGE.KV_trips_view_other", "$KV.trips_view_spend_g2.x", "$JS.API.STREAM.UPDATE.KV_trips_view_spend", "$JS.API.STREAM.UPDATE.TRIPS_EVENTS") {
		if allowed(node.Publish, s, "") {
			t.Errorf("node may publish %s", s)
		}
	}
	client := viewPerms(t, RoleClient)
	for _, s := range []string{"esjet.trips.views", "esjet.trips.views.spend.get", "esjet.trips.views.spend.list"} {
		if !allowed(client.Publish, s, "") {
			t.Errorf("client may not query %s", s)
		}
	}
	op := viewPerms(t, RoleOperator)
	for _, s := range []string{"esjet.trips.views", "esjet.trips.views.spend.get", "esjet.trips.views.spend.parked",
		"$JS.API.STREAM.INFO.KV_trips_view_spend-b", "$JS.API.DIRECT.GET.KV_trips_view_spend.$KV.trips_view_spend.ada",
		"$JS.API.STREAM.INFO.KV_trips_projections", "esjet.trips.ops.oncall.projections.rebuild"} {
		if !allowed(op.Publish, s, "") {
			t.Errorf("operator may not read %s", s)
		}
	}
	for _, role := range []string{RoleClient, RoleOperator, RoleReceiver} {
		p := viewPerms(t, role)
		for _, s := range append(writes, "$JS.API.STREAM.PURGE.KV_trips_view_spend", "$JS.API.STREAM.UPDATE.KV_trips_view_spend", "$JS.API.STREAM.CREATE.KV_trips_view_spend-b") {
			if allowed(p.Publish, s, "") {
				t.Errorf("role %s may publish %s", role, s)
			}
		}
	}
	// A receiver's idempotency bucket may not be one of the node's.
	for _, b := range []string{"trips_view_spend", "trips_view_x-b", "trips_projections", "trips_receipts"} {
		_, err := RolePermissions(RoleReceiver, RoleSpec{Namespace: "trips", Subject: "billing.charge", Bucket: b, User: "billing"})
		if err == nil || !strings.Contains(err.Error(), b) {
			t.Errorf("receiver with bucket %s: %v, want an error naming it", b, err)
		}
	}
}

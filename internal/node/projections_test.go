package node

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/projection"
	"github.com/esjet/esjet/internal/wire"
)

// TestProjectionLeaseSettingsReachTheRunnerAndStatus: projections.lease_ttl
// and heartbeat are what the runner renews and takes over by, and what
// status judges an owner frozen by: a lease last renewed 10 s ago is a
// live owner's under a 60 s TTL (it would be frozen under the default 5 s).
func TestProjectionLeaseSettingsReachTheRunnerAndStatus(t *testing.T) {
	cfg := testConfig(t, "leases")
	cfg.Projections.LeaseTTL, cfg.Projections.Heartbeat = config.Duration(time.Minute), config.Duration(2*time.Second)
	if pc := ProjectionConfig(cfg); pc.LeaseTTL != time.Minute || pc.Heartbeat != 2*time.Second {
		t.Errorf("runner config: lease TTL %s, heartbeat %s; want 1m0s, 2s", pc.LeaseTTL, pc.Heartbeat)
	}
	n := startTestNode(t, cfg, Options{})
	js := n.JetStream()
	ctl, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: wire.ProjectionsBucket("leases")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: projection.ViewBucket("leases", "quiet", 1)}); err != nil {
		t.Fatal(err)
	}
	c, _ := json.Marshal(projection.Control{Active: 1, Latest: 1, Partitions: 1, SlotsFrom: 1})
	l, _ := json.Marshal(projection.Lease{Owner: "elsewhere", Heartbeat: time.Now().Add(-10 * time.Second), State: projection.StateCaughtUp})
	if _, err := ctl.Put(t.Context(), "quiet.ctl", c); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.Put(t.Context(), "quiet.g1.p0.lease", l); err != nil {
		t.Fatal(err)
	}
	st, err := n.Views().Status(t.Context(), "quiet")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Parts) != 1 || st.Parts[0].State != projection.StateCaughtUp {
		t.Errorf("a lease renewed 10s ago under a 1m TTL: %+v, want its owner live (caught_up)", st.Parts)
	}
}

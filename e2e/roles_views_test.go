package e2e

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/projection"
)

// TestReadModelsRunWithNATSUsers runs `esjet run` with nats.embedded.users:
// the node (role node) runs the demo's views, which fill and answer
// queries over HTTP and, to a client user, over NATS; an operator user
// rebuilds one and switches back, all through the node; neither a client
// nor an operator can write a view's bucket (nor the projections' leases).
func TestReadModelsRunWithNATSUsers(t *testing.T) {
	t.Parallel()
	n, dir, cfgFile := startNodeWithUsers(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node's log:\n%s", n.stderr.String())
		}
	})
	sendTrip(t, n, "lisbon", tripRequest)
	waitTrip(t, n, "lisbon", sagaTimeout, "confirmed", func(s tripState) bool { return s.Status == "confirmed" })

	// The views fill, and answer over HTTP.
	base := "http://" + n.httpAddr + "/v1/views/"
	natstest.Eventually(t, 30*time.Second, func() bool {
		var d struct{ Key string }
		return getJSON(t, base+"trips_by_status/confirmed/lisbon", &d) == 200 && d.Key == "confirmed/lisbon"
	})
	natstest.Eventually(t, 30*time.Second, func() bool {
		var d struct {
			Value struct{ Confirmed int }
		}
		return getJSON(t, base+"traveler_spend/ada", &d) == 200 && d.Value.Confirmed == 1
	})

	// A client queries a view over NATS, through the node.
	client := connectAs(t, n.natsURL, "app")
	if got := client.request(t, "esjet.demo.views.traveler_spend.get", `{"key":"ada"}`); !strings.Contains(got, `"traveler":"ada"`) {
		t.Fatalf("client's view query: %s", got)
	}

	// The operator rebuilds trips_by_status through the node; the new
	// generation switches in, and a switch back serves generation 1.
	oncall := []string{"ESJET_NATS_EMBEDDED_LISTEN=" + n.natsListen, "ESJET_NATS_EMBEDDED_AUTH_USER=oncall", "ESJET_NATS_EMBEDDED_AUTH_PASSWORD=pw-oncall"}
	cli := func(args ...string) string {
		t.Helper()
		out, stderr, code := runCLIFailEnv(t, dir, oncall, append([]string{"--config", cfgFile}, args...)...)
		if code != 0 {
			t.Fatalf("esjet %s as the operator: exit %d\n%s%s", strings.Join(args, " "), code, out, stderr)
		}
		return out
	}
	if out := cli("projections", "rebuild", "trips_by_status"); !strings.Contains(out, "generation 2") {
		t.Fatalf("rebuild: %s", out)
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		var st projection.Status
		return json.Unmarshal([]byte(cli("projections", "status", "trips_by_status", "--json")), &st) == nil && st.Active == 2 && st.Build == nil
	})
	var doc struct {
		Key        string
		Generation int
	}
	if code := getJSON(t, base+"trips_by_status/confirmed/lisbon", &doc); code != 200 || doc.Generation != 2 {
		t.Fatalf("after the rebuild: %d %+v", code, doc)
	}
	cli("projections", "switch", "trips_by_status", "1")
	if code := getJSON(t, base+"trips_by_status/confirmed/lisbon", &doc); code != 200 || doc.Generation != 1 {
		t.Fatalf("after the switch back: %d %+v", code, doc)
	}
	if out := cli("projections", "ls"); !strings.Contains(out, "trips_by_status") || !strings.Contains(out, "traveler_spend") {
		t.Errorf("projections ls as the operator:\n%s", out)
	}

	// Nobody but the node writes a view or a lease.
	op := connectAs(t, n.natsURL, "oncall")
	forged := nats.NewMsg("")
	forged.Data = []byte(`{"forged":true}`)
	for _, rc := range []*roleConn{client, op} {
		for _, subject := range []string{"$KV.demo_view_traveler_spend.ada", "$KV.demo_view_trips_by_status-b.confirmed.lisbon",
			"$KV.demo_projections.traveler_spend.g1.p0.lease", "$JS.API.STREAM.PURGE.KV_demo_view_traveler_spend"} {
			forged.Subject = subject
			if err := rc.nc.PublishMsg(forged); err != nil {
				t.Fatal(err)
			}
			rc.refused(t, "write "+subject, subject)
		}
	}
	var spend struct {
		Value json.RawMessage
	}
	if getJSON(t, base+"traveler_spend/ada", &spend) != 200 || strings.Contains(string(spend.Value), "forged") {
		t.Errorf("traveler_spend/ada after the forged writes: %s", spend.Value)
	}
	for _, bad := range []string{"permissions violation", "projections not started"} {
		if strings.Contains(strings.ToLower(n.stderr.String()), bad) {
			t.Errorf("the node's log says %q:\n%s", bad, n.stderr.String())
		}
	}
	n.stop(t, syscall.SIGTERM)
}

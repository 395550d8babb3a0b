package api

import "testing"

// esjet.<ns>.ops.<user>.dlq.<action> goes to the ops handler (the node's DLQ
// actions), not to an aggregate type "ops"; any other shape under ops is no
// route.
func TestRouteSubjectOps(t *testing.T) {
	r, err := routeSubject("esjet.trips", "esjet.trips.ops.oncall.dlq.retry")
	if err != nil || r.op != opOps || r.user != "oncall" || r.action != "retry" || r.endpoint != endpointOps {
		t.Fatalf("ops route: %+v, %v", r, err)
	}
	for _, s := range []string{"esjet.trips.ops.oncall.dlq", "esjet.trips.ops.oncall.x.retry", "esjet.trips.ops.a.b.state", "esjet.trips.ops"} {
		if r, err := routeSubject("esjet.trips", s); err == nil {
			t.Errorf("%s routed as %+v", s, r)
		}
	}
}

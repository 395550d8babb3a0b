package api_test

import (
	"testing"

	"github.com/esjet/esjet/internal/api"
)

// The HTTP roles as the README's Security table states them.
func TestPermits_TheHTTPRoles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		method, path            string
		client, operator, admin bool
	}{
		{"POST", "/v1/trip/t1/request_trip", true, false, true},
		{"POST", "/v1/raw/invoice/i1/events", true, false, true},
		{"POST", "/v1/multi", true, false, true},
		{"GET", "/v1/trip/t1", true, true, true},
		{"GET", "/v1/log", true, true, true},
		{"GET", "/v1/views/trips_by_status/trip/t1", true, true, true},
		{"GET", "/console/", false, true, true},
		{"GET", "/console/api/dlq", false, true, true},
		{"POST", "/console/api/dlq/1/discard", false, true, true},
		{"GET", "/metrics", false, true, true},
		{"GET", "/somewhere-new", false, false, true},
	} {
		for role, want := range map[string]bool{api.RoleClient: tc.client, api.RoleOperator: tc.operator, api.RoleAdmin: tc.admin} {
			if got := api.Permits(role, tc.method, tc.path); got != want {
				t.Errorf("Permits(%s, %s %s) = %v, want %v", role, tc.method, tc.path, got, want)
			}
		}
	}
}

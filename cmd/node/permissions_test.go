package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/esjet/esjet/demo/services"
	"github.com/esjet/esjet/internal/broker"
)

func TestPermissionsJSONListsEveryRoleOfTheNamespace(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"permissions", "--namespace", "trips", "--format", "json"}, nil, &stdout, &stderr); err != nil {
		t.Fatalf("permissions: %v\n%s", err, stderr.String())
	}
	var out permissionsJSON
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout.String())
	}
	roles := map[string]int{}
	for _, u := range out.Users {
		roles[u.Role]++
		if u.Role == broker.RoleReceiver && len(u.Permissions.Sub.Allow) != 1 {
			t.Errorf("receiver %s subscribes to %v, want its one subject", u.User, u.Permissions.Sub.Allow)
		}
		if u.Role == broker.RoleNode && !slices.Contains(u.Permissions.Pub.Allow, "trips.evt.>") {
			t.Errorf("node may not append: %v", u.Permissions.Pub.Allow)
		}
		if u.Role == broker.RoleClient && slices.Contains(u.Permissions.Pub.Allow, "trips.evt.>") {
			t.Errorf("client may append: %v", u.Permissions.Pub.Allow)
		}
	}
	// One receiver per subject the demo's workers request.
	if out.Namespace != "trips" || roles[broker.RoleNode] != 1 || roles[broker.RoleClient] != 1 || roles[broker.RoleOperator] != 1 || roles[broker.RoleAdmin] != 1 || roles[broker.RoleReceiver] != 6 {
		t.Errorf("namespace %s, users by role %v", out.Namespace, roles)
	}
	if !strings.Contains(stdout.String(), `"trips.evt.>"`) {
		t.Error("subjects are HTML-escaped")
	}
}

func TestPermissionsOneRoleAsServerConfig(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"permissions", "--namespace", "trips", "--role", "receiver", "--subject", "billing.charge"}, nil, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	s := stdout.String()
	if strings.Count(s, "user:") != 1 || !strings.Contains(s, `allow: ["billing.charge"]`) || !strings.Contains(s, "$"+broker.PasswordVar("trips-receiver")) {
		t.Errorf("receiver block:\n%s", s)
	}
	err = run(t.Context(), []string{"permissions", "--role", "root"}, nil, &stdout, &stderr)
	if !errors.Is(err, broker.ErrRole) || !strings.Contains(err.Error(), "operator") {
		t.Errorf("unknown role: %v", err)
	}
}

func TestBrokerKnowsTheDemoServicesNames(t *testing.T) {
	if broker.DemoSubjects != services.SubjectAll || broker.DemoBucket != services.DefaultBucket {
		t.Errorf("broker's demo names %s, %s; demo/services has %s, %s", broker.DemoSubjects, broker.DemoBucket, services.SubjectAll, services.DefaultBucket)
	}
}

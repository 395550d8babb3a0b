package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// esjet provision, as an admin, creates the namespace, brings a changed
// setting back to the configuration (--dry-run first prints the plan and
// changes nothing), and as a user that may not update streams says it
// needs the admin role.
func TestProvisionCommandAppliesTheConfigurationAsAdmin(t *testing.T) {
	t.Parallel()
	noUpdate := &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.UPDATE.>"}},
		Subscribe: &server.SubjectPermission{Allow: []string{">"}},
	}
	s := natstest.RunServer(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "admin", Password: "x"}, {Username: "node", Password: "x", Permissions: noUpdate}}
	})
	ns := natstest.Namespace(t)
	names := streams.NamesFor(ns)
	cli := func(user string, args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		env := []string{"ESJET_NATS_EXTERNAL_AUTH_USER=" + user, "ESJET_NATS_EXTERNAL_AUTH_PASSWORD=x"}
		err := run(t.Context(), append([]string{"provision", "--namespace", ns, "--url", s.ClientURL()}, args...), env, &stdout, &stderr)
		return stdout.String(), err
	}
	out, err := cli("admin")
	if err != nil {
		t.Fatalf("provision: %v\n%s", err, out)
	}
	for _, name := range []string{names.Events, names.Outbox, names.DLQ, names.Snapshots, names.Receipts} {
		if !strings.Contains(out, name+"  ") || !strings.Contains(out, "created") {
			t.Errorf("provision output does not say %s was created:\n%s", name, out)
		}
	}
	if !strings.Contains(out, ns+"_view_trips_by_status") || !strings.Contains(out, "the node creates it") {
		t.Errorf("provision output does not say the views' buckets are the node's to create:\n%s", out)
	}

	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("admin", "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	maxAge := func() time.Duration {
		st, err := js.Stream(t.Context(), names.Outbox)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().Config.MaxAge
	}
	st, err := js.Stream(t.Context(), names.Outbox)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxAge = time.Hour
	if _, err := js.UpdateStream(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}

	out, err = cli("admin", "--dry-run")
	if err != nil {
		t.Fatalf("provision --dry-run: %v\n%s", err, out)
	}
	if !strings.Contains(out, "would update") || !strings.Contains(out, "max_age: 1h0m0s → 168h0m0s") || !strings.Contains(out, "nothing was changed") {
		t.Errorf("dry run output:\n%s", out)
	}
	if got := maxAge(); got != time.Hour {
		t.Fatalf("--dry-run changed OUTBOX max_age to %v", got)
	}

	out, err = cli("node")
	if err == nil || !strings.Contains(err.Error(), "esjet provision needs the admin role") {
		t.Fatalf("provision as the node user: %v\n%s", err, out)
	}
	if got := maxAge(); got != time.Hour {
		t.Fatalf("the node user changed OUTBOX max_age to %v", got)
	}

	out, err = cli("admin")
	if err != nil {
		t.Fatalf("provision: %v\n%s", err, out)
	}
	if !strings.Contains(out, "updated") || !strings.Contains(out, "max_age: 1h0m0s → 168h0m0s") || !strings.Contains(out, "unchanged") {
		t.Errorf("provision output:\n%s", out)
	}
	if got := maxAge(); got != 7*24*time.Hour {
		t.Errorf("OUTBOX max_age %v after provision, want 168h", got)
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// The read-only ops commands, given a namespace the server holds none of
// (a typo), fail with one line naming the namespaces it does hold, instead
// of a table of missing streams or a raw JetStream 404 that suggests
// provisioning the typo.
func TestOpsCommandsRefuseANamespaceTheServerDoesNotHold(t *testing.T) {
	t.Parallel()
	s, ns := provisionedServer(t)
	want := `no namespace "` + ns + `o" on this server (namespaces here: ` + ns + `)`
	for _, args := range [][]string{{"streams"}, {"dlq", "ls"}, {"outbox"}, {"reconcile"}, {"archive", "status"}, {"projections", "ls"}, {"backup", "--out", "-"}} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), append(args, "--url", s.ClientURL(), "--namespace", ns+"o"), nil, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("esjet %s --namespace %so: %v\nstdout: %s\nwant one line with %q", strings.Join(args, " "), ns, err, stdout.String(), want)
			}
		})
	}
}

// provisionedServer is a server holding one provisioned namespace, ns.
func provisionedServer(t *testing.T) (*server.Server, string) {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	if _, err := streams.Provision(t.Context(), js, ns, streams.ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	return s, ns
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/node"
)

// esjet sites takes the fleet's shared file (no edge.role in it: each node
// adds its own) and asks the hub of the file's namespace. (A stand-in
// answers for the hub: what is pinned here is the CLI's side.)
func TestSitesTakesTheFleetFileAndItsNamespace(t *testing.T) {
	s := natstest.RunServer(t)
	nc, _ := natstest.Connect(t, s)
	sub, err := nc.Subscribe(node.SitesSubject("shops"), func(m *nats.Msg) {
		_ = m.Respond([]byte(`[{"site":"shop1","state":"ok","connected":true,"site_last_seq":7,"hub_seq":7,"lag":0,"active_ms":10,"restarts":0}]`))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	fleet := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(fleet, []byte(`namespace: shops
demo: {services: false}
edge:
  sites: [shop1, shop2]
  hub_urls: [nats-leaf://127.0.0.1:7422]
  leaf_listen: 127.0.0.1:7422
`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(s.ClientURL(), "nats://")
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"sites", "--config", fleet, "--listen", addr}, nil, &stdout, &stderr); err != nil {
		t.Fatalf("esjet sites --config fleet.yaml: %v", err)
	}
	if !strings.Contains(stdout.String(), "shop1") {
		t.Errorf("esjet sites printed:\n%s", stdout.String())
	}
	// Without the file: the default namespace, and the error says what to pass.
	stdout.Reset()
	err = run(t.Context(), []string{"sites", "--listen", addr}, nil, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "--config") || !strings.Contains(err.Error(), "--namespace") {
		t.Errorf("esjet sites of namespace demo with no hub: %v; want it to name --config and --namespace", err)
	}
	// With the file, at a server that is not the hub's: the error names
	// the server it asked and the flags that reach another.
	other := natstest.RunServer(t)
	err = run(t.Context(), []string{"sites", "--config", fleet, "--url", other.ClientURL()}, nil, &stdout, &stderr)
	for _, want := range []string{"at " + other.ClientURL(), "--url", "--listen"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("esjet sites at a server with no hub: %v; want it to say %q", err, want)
		}
	}
}

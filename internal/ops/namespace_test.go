package ops

import (
	"errors"
	"testing"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// A namespace the server holds none of is refused with the namespaces it
// does hold; one it holds passes.
func TestRequireNamespaceNamesTheNamespacesHere(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, js := natstest.Connect(t, natstest.RunServer(t))
	var empty *NoNamespaceError
	if err := RequireNamespace(ctx, js, "demo"); !errors.As(err, &empty) || len(empty.Here) != 0 {
		t.Errorf("an empty server: %v, want a NoNamespaceError with no namespaces here", err)
	}
	for _, ns := range []string{"demo", "shop-2"} {
		if _, err := streams.Provision(ctx, js, ns, streams.ProvisionConfig{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := RequireNamespace(ctx, js, "demo"); err != nil {
		t.Errorf("namespace demo, provisioned: %v", err)
	}
	err := RequireNamespace(ctx, js, "demoo")
	if !errors.Is(err, ErrNoNamespace) {
		t.Fatalf("namespace demoo: %v, want ErrNoNamespace", err)
	}
	if want := `no namespace "demoo" on this server (namespaces here: demo, shop-2): check --namespace or the config's namespace`; err.Error() != want {
		t.Errorf("namespace demoo: %q\nwant %q", err, want)
	}
}

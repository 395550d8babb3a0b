package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/wire"
)

// NoNamespaceError is returned by [RequireNamespace] when none of a
// namespace's streams and buckets exist on the server: most often a
// mistyped --namespace, which "start the node to provision it" would
// only make worse. Here lists the namespaces the server does hold.
type NoNamespaceError struct {
	Namespace string
	Here      []string
}

func (e *NoNamespaceError) Error() string {
	if len(e.Here) == 0 {
		return fmt.Sprintf("no namespace %q on this server (no esjet namespace here yet: start a node once to provision one)", e.Namespace)
	}
	return fmt.Sprintf("no namespace %q on this server (namespaces here: %s): check --namespace or the config's namespace", e.Namespace, strings.Join(e.Here, ", "))
}

func (e *NoNamespaceError) Unwrap() error { return ErrNoNamespace }

// RequireNamespace returns a [*NoNamespaceError] when the server js reaches
// holds none of namespace ns's streams and buckets (its event log, OUTBOX,
// dead letters, snapshots, receipts, workers, projections), and nil when it
// holds any of them, or when it cannot list streams (the command's own
// lookups then say what is wrong). The read-only ops commands ask it before
// they look a stream up.
func RequireNamespace(ctx context.Context, js jetstream.JetStream, ns string) error {
	n := wire.NamesFor(ns)
	own := []string{n.Events, n.Outbox, n.DLQ, wire.KVStream(n.Snapshots), wire.KVStream(n.Receipts),
		wire.KVStream(n.Workers), wire.KVStream(wire.ProjectionsBucket(ns))}
	var here []string
	lister := js.StreamNames(ctx)
	for name := range lister.Name() {
		if slices.Contains(own, name) {
			return nil
		}
		if other, ok := wire.NamespaceOfEvents(name); ok {
			here = append(here, other)
		}
	}
	if lister.Err() != nil {
		return nil
	}
	slices.Sort(here)
	return &NoNamespaceError{Namespace: ns, Here: slices.Compact(here)}
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/bench/raw"
	"github.com/esjet/esjet/internal/broker"
	"github.com/esjet/esjet/internal/node"
	"github.com/esjet/esjet/internal/streams"
)

// env is what the phases share: the node, its connections and the raw
// side's appender.
type env struct {
	opts   Options
	cfg    config.Config
	ns     string
	node   *node.Node
	nodeJS jetstream.JetStream // the node's own (in-process when embedded) connection
	tcp    *nats.Conn          // a TCP client, as a micro client would be
	tcpJS  jetstream.JetStream
	ids    []string      // aggregate ids of the append and micro phases
	raw    *raw.Appender // the raw side of append and micro
	// rawGroup is raw JetStream's own group commit beside the append
	// phase, when the node group-commits (nil otherwise).
	rawGroup *raw.GroupAppender
	sqlite   *sqliteOutbox // the SQLite-outbox baseline of append and effects (sqlite.go)
	// drained numbers the drain rounds of the whole run (drain.go).
	drained int
	// loadID is the 1,000-event aggregate the load phases read, filled
	// once per run; loadFills numbers the fills (load.go).
	loadID    string
	loadFills int
	// namespaces this run provisioned besides the node's (deleted at the
	// end in external mode; the embedded store is removed whole).
	extra []string
	scale *Scale // the scale phase's figures
}

// refuseExisting fails if any of the namespaces already has an event
// stream on the cluster.
func refuseExisting(ctx context.Context, cfg config.Config, namespaces ...string) error {
	nc, err := broker.Connect(ctx, cfg, "esjet-bench-check")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	for _, ns := range namespaces {
		_, err := js.Stream(ctx, streams.NamesFor(ns).Events)
		if err == nil {
			return fmt.Errorf("namespace %s already exists on this cluster: the benchmark writes and then deletes its namespace, so pick an unused one with --namespace", ns)
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return err
		}
	}
	return nil
}

// provision creates namespace ns's streams and buckets like the node's.
func (e *env) provision(ctx context.Context, ns string) (*streams.Log, error) {
	if _, err := streams.Provision(ctx, e.nodeJS, ns, node.ProvisionConfig(e.cfg), nil); err != nil {
		return nil, fmt.Errorf("provision %s: %w", ns, err)
	}
	if !slices.Contains(e.extra, ns) {
		e.extra = append(e.extra, ns)
	}
	return streams.Open(ctx, e.nodeJS, ns, node.LogConfig(e.cfg), nil)
}

// deleteNamespace removes what provision created.
func deleteNamespace(ctx context.Context, js jetstream.JetStream, ns string, cfg config.Config) {
	names := streams.NamesFor(ns)
	pc := node.ProvisionConfig(cfg)
	for _, sc := range streams.StreamConfigs(names, pc) {
		_ = js.DeleteStream(ctx, sc.Name)
	}
	for _, kc := range streams.BucketConfigs(names, pc) {
		_ = js.DeleteKeyValue(ctx, kc.Bucket)
	}
}

func redact(urls []string) string {
	out := make([]string, len(urls))
	for i, s := range urls {
		if u, err := url.Parse(s); err == nil && u.User != nil {
			u.User = url.User("redacted")
			s = u.String()
		}
		out[i] = s
	}
	return strings.Join(out, ",")
}

package node

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// On a cluster of three servers, a node whose configuration does not set
// streams.replicas makes every stream and bucket of its namespace R3 and
// says so — given the URL of one server only (the others are found from
// the cluster); an explicit streams.replicas: 1 stays R1. Two nodes started
// together on a fresh namespace both start.
func TestNodesOnAClusterOfThree(t *testing.T) {
	t.Parallel()
	cluster := natstest.RunCluster(t)
	external := func(ns string) config.Config {
		cfg := testConfig(t, ns)
		cfg.NATS.Mode = config.ModeExternal
		cfg.NATS.External.URLs = []string{cluster[0].ClientURL()}
		return cfg
	}
	_, js := natstest.Connect(t, cluster[1])
	replicas := func(t *testing.T, ns string) map[string]int {
		t.Helper()
		got := map[string]int{}
		for _, o := range streams.Objects(ns, streams.ProvisionConfig{}) {
			st, err := js.Stream(t.Context(), o.Config.Name)
			if err != nil {
				t.Fatalf("stream %s: %v", o.Config.Name, err)
			}
			got[o.Config.Name] = st.CachedInfo().Config.Replicas
		}
		return got
	}

	t.Run("auto is R3", func(t *testing.T) {
		ns := natstest.Namespace(t)
		var logs bytes.Buffer
		n := startTestNode(t, external(ns), Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		for name, r := range replicas(t, ns) {
			if r != 3 {
				t.Errorf("%s: R%d, want R3", name, r)
			}
		}
		if n.cfg.Streams.Replicas != 3 {
			t.Errorf("node runs with streams.replicas %d, want 3", n.cfg.Streams.Replicas)
		}
		if !strings.Contains(logs.String(), "R3") || !strings.Contains(logs.String(), "servers=3") {
			t.Errorf("the node does not say why its streams are R3:\n%s", logs.String())
		}
	})

	t.Run("explicit 1 is R1", func(t *testing.T) {
		ns := natstest.Namespace(t)
		cfg := external(ns)
		cfg.Streams.Replicas = 1
		startTestNode(t, cfg, Options{})
		for name, r := range replicas(t, ns) {
			if r != 1 {
				t.Errorf("%s: R%d, want R1 (set explicitly)", name, r)
			}
		}
	})

	t.Run("two nodes started together", func(t *testing.T) {
		ns := natstest.Namespace(t)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range 2 {
			cfg := external(ns)
			cfg.NATS.External.URLs = []string{cluster[i+1].ClientURL()}
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
				defer cancel()
				n, err := Start(ctx, cfg, Options{})
				errs[i] = err
				if err == nil {
					t.Cleanup(func() { closeTestNode(t, n) })
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("node %d: %v", i+1, err)
			}
		}
		for name, r := range replicas(t, ns) {
			if r != 3 {
				t.Errorf("%s: R%d, want R3", name, r)
			}
		}
	})
}

// A single server, and a node embedding its server, stay R1 by default.
func TestReplicasAutoIsOneOnASingleServer(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	ns := natstest.Namespace(t)
	cfg := testConfig(t, ns)
	cfg.NATS.Mode = config.ModeExternal
	cfg.NATS.External.URLs = []string{s.ClientURL()}
	n := startTestNode(t, cfg, Options{})
	if n.cfg.Streams.Replicas != 1 {
		t.Errorf("external single server: streams.replicas %d, want 1", n.cfg.Streams.Replicas)
	}
	_, js := natstest.Connect(t, s)
	st, err := js.Stream(t.Context(), streams.NamesFor(ns).Events)
	if err != nil || st.CachedInfo().Config.Replicas != 1 {
		t.Fatalf("EVENTS: %v, want R1", err)
	}
}

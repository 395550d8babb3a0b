package ops

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/broker"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// A run reads ranges longer than a batch through consumers of its own
// where its connection may create them (the node, an admin), and with
// direct gets where it may not (the operator role): the same report either
// way, and the operator's run does not wait on consumers it is refused.
func TestReconcileReadsTheSameAsAnOperatorAndAsAnAdmin(t *testing.T) {
	t.Parallel()
	ns := natstest.Namespace(t)
	op, err := broker.RolePermissions(broker.RoleOperator, broker.RoleSpec{Namespace: ns, User: "op"})
	if err != nil {
		t.Fatal(err)
	}
	s := natstest.RunServer(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "admin", Password: "x"}, {Username: "op", Password: "x", Permissions: op}}
	})
	connect := func(user string) jetstream.JetStream {
		nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(user, "x"), nats.CustomInboxPrefix(broker.InboxPrefix(user)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	admin, operator := connect("admin"), connect("op")
	if _, err := streams.Provision(t.Context(), admin, ns, streams.ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	l, err := streams.Open(t.Context(), admin, ns, streams.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &rcEnv{t: t, js: admin, ns: ns, names: streams.NamesFor(ns), log: l, pos: map[string]streams.Position{}}
	flight := streams.Command{Kind: "book_flight"}
	for i := range 12 {
		rec := e.decide(fmt.Sprintf("t%d", i), flight)
		if i != 5 {
			e.settle(rec)
		}
	}
	orphan := e.decide("orphan", flight)
	e.ackRelay(orphan.Seq)

	cfg := ReconcileConfig{Checkpoint: CheckpointOff, Batch: 2, Chunk: 8}
	if !streams.ConsumersAllowed(t.Context(), admin, e.names.Events) || streams.ConsumersAllowed(t.Context(), operator, e.names.Events) {
		t.Fatal("want consumers for the admin, not for the operator")
	}
	run := func(js jetstream.JetStream) Report {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		rep, err := NewReconciler(js, ns, cfg, nil).Run(ctx, nil)
		if err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		return rep
	}
	byAdmin, byOperator := run(admin), run(operator)
	same(t, byOperator, byAdmin)
	if byAdmin.Scanned != byOperator.Scanned || byAdmin.Totals.Orphans != 2 || byAdmin.Totals.Completed != 11 {
		t.Fatalf("admin scanned %+v totals %+v; operator scanned %+v; want the same, 2 orphans, 11 completed",
			byAdmin.Scanned, byAdmin.Totals, byOperator.Scanned)
	}
	// The operator may not write the object store: its checkpoint is a
	// file, and its second run starts from it.
	file := filepath.Join(t.TempDir(), "cp", "reconcile.json")
	opRun := func() Report {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		rep, err := NewReconciler(operator, ns, ReconcileConfig{CheckpointFile: file, Batch: 2, Chunk: 8}, nil).Run(ctx, nil)
		if err != nil {
			t.Fatalf("reconcile with a checkpoint file: %v", err)
		}
		return rep
	}
	first := opRun()
	if !first.Checkpoint.Saved || first.Checkpoint.Incremental {
		t.Fatalf("first run with a file: %+v", first.Checkpoint)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("no checkpoint file: %v", err)
	}
	second := opRun()
	if !second.Checkpoint.Incremental || second.Totals != first.Totals {
		t.Fatalf("second run: %+v totals %+v, want incremental with %+v", second.Checkpoint, second.Totals, first.Totals)
	}
	if _, err := admin.ObjectStore(t.Context(), wire.ReconcileBucket(ns)); err == nil {
		t.Error("the operator's runs created the object store")
	}
}

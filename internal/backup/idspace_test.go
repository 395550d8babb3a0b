package backup_test

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/demo/trip"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/backup"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/shred"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// TestANamespaceMovedUnderAnotherNameKnowsItsRepeats: decision ids derive
// from the namespace (a keyed request's, an outcome's), so a log restored
// under another name (--as) must keep deriving them as its first
// namespace did. Before, a node on the copy took every finished command's
// repeated outcome report for a new one and refused it (an ERROR per
// command, "the aggregate still awaits" in esjet outbox), and a client's
// retry of a keyed request was decided again.
func TestANamespaceMovedUnderAnotherNameKnowsItsRepeats(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	reg, err := aggregate.NewRegistry(trip.Definition())
	if err != nil {
		t.Fatal(err)
	}
	repo := func(js jetstream.JetStream, ns string) *aggregate.Repository {
		l, err := streams.Open(ctx, js, ns, streams.Config{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		sealer := &shred.Sealer{Keys: &shred.Lazy{JS: js, Namespace: ns, Replicas: 1}}
		return aggregate.NewRepository(l, nil, reg, aggregate.Config{Namespace: ns, SnapshotEvery: -1, Sealer: sealer}, nil)
	}
	req, _ := json.Marshal(trip.RequestTrip{Traveler: "ada", Destination: "Lisbon", Budget: 100_000, FlightPrice: 40_000, HotelPrice: 30_000})
	request := aggregate.Request{Type: trip.Type, ID: "t1", Kind: trip.KindRequestTrip, Payload: req, IdempotencyKey: "k1"}
	locked, _ := json.Marshal(esjet.Outcome{CommandID: "trip:t1:1:0"})
	outcome := aggregate.Request{Type: trip.Type, ID: "t1", Kind: esjet.DoneKind(trip.KindLockBudget), Payload: locked,
		IdempotencyKey: wire.DoneKey("trip:t1:1:0"), CausationID: "trip:t1:1:0"}

	_, js := natstest.Connect(t, natstest.RunServer(t))
	ns := natstest.Namespace(t)
	if _, err := streams.Provision(ctx, js, ns, streams.ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	first := repo(js, ns)
	if _, err := first.Handle(ctx, request); err != nil {
		t.Fatal(err)
	}
	if _, err := first.HandleOutcome(ctx, outcome); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if _, err := backup.Backup(ctx, js, ns, &archive, backup.Options{}); err != nil {
		t.Fatal(err)
	}

	_, js2 := natstest.Connect(t, natstest.RunServer(t))
	to := ns + "moved"
	if _, err := backup.Restore(ctx, js2, func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(archive.Bytes())), nil },
		backup.RestoreOptions{Namespace: to}); err != nil {
		t.Fatal(err)
	}
	if got, err := streams.IDSpaceOf(ctx, js2, to); err != nil || got != ns {
		t.Fatalf("id space of the copy: %q, %v; want %q", got, err, ns)
	}
	for _, name := range []string{streams.NamesFor(to).Events, streams.NamesFor(to).Outbox, streams.NamesFor(to).DLQ} {
		st, err := js2.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if d := st.CachedInfo().Config.Description; strings.Contains(d, ns+".") || !strings.Contains(d, to+".") {
			t.Errorf("%s's description after the move: %q; want it to name %s's subjects", name, d, to)
		}
	}
	moved := repo(js2, to)
	if res, err := moved.Handle(ctx, request); err != nil || !res.Replayed {
		t.Errorf("the keyed request retried on the copy: %+v, %v; want its first decision replayed", res, err)
	}
	if res, err := moved.HandleOutcome(ctx, outcome); err != nil || !res.Replayed {
		t.Errorf("the outcome reported again on the copy: %+v, %v; want a replay, not a refusal", res, err)
	}
}

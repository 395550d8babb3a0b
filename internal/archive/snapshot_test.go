package archive_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/archive"
	"github.com/esjet/esjet/internal/wire"
)

// An archived aggregate's snapshot is dropped with its history: the
// tombstone carries the state, and the snapshot would be a second, older
// copy of it (sealed state, idempotency keys of archived decisions) kept
// in the snapshots bucket for ever.
func TestArchivingDropsTheSnapshotAndItsKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ns := f.log.Names().Namespace
	snaps, err := f.js.KeyValue(t.Context(), f.log.Names().Snapshots)
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := aggregate.NewRegistry(f.def)
	eager := aggregate.NewRepository(f.log, snaps, reg, aggregate.Config{Namespace: ns, SnapshotEvery: 1}, nil)
	for _, c := range []aggregate.Request{
		{Type: "tally", ID: "s1", Kind: "add", Payload: json.RawMessage(`{"by":2}`), IdempotencyKey: "k1"},
		{Type: "tally", ID: "s1", Kind: "add", Payload: json.RawMessage(`{"by":3}`)},
		{Type: "tally", ID: "s1", Kind: "close", Payload: json.RawMessage(`{}`)},
	} {
		if _, err := eager.Handle(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := snaps.Get(t.Context(), "tally.s1"); err != nil {
		t.Fatalf("no snapshot before archiving: %v", err)
	}
	a := archive.New(f.js, f.log, f.store, func(ctx context.Context, typ, id string, at wire.Position) (json.RawMessage, int, int, error) {
		return f.repo.ArchiveState(ctx, typ, id, at)
	}, archive.Config{Rules: map[string]archive.Rule{"tally": {ClosedBy: []string{"closed"}}}, DropSnapshot: f.repo.DropSnapshot}, nil)
	if p, err := a.Run(t.Context(), nil); err != nil || p.Archived != 1 {
		t.Fatalf("archive: %+v %v", p, err)
	}
	if e, err := snaps.Get(t.Context(), "tally.s1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the archived aggregate's snapshot is still there: %v %v", e, err)
	}
	// A restarted node loads the state from the tombstone.
	cold := aggregate.NewRepository(f.log, snaps, reg, aggregate.Config{Namespace: ns, SnapshotEvery: 1}, nil)
	st, err := cold.Get(t.Context(), "tally", "s1")
	if err != nil || st.Value.(tally) != (tally{N: 5, Closed: true}) || st.Position.Version != 4 {
		t.Fatalf("state after archiving: %+v %v", st, err)
	}
}

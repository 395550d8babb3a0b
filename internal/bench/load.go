package bench

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/streams"
)

// The load phase: a cold load of one 1,000-event aggregate (the cache off)
// through the repository, once without snapshots (all events folded) and
// once from its snapshot plus the tail check, each beside the raw floor:
// the same batched direct get of its 1,000 messages that Log.Load uses,
// touching only the bytes.

func (e *env) loadPhase(ctx context.Context, progress func(float64)) ([]Phase, error) {
	names := streams.NamesFor(e.ns)
	snaps, err := e.nodeJS.KeyValue(ctx, names.Snapshots)
	if err != nil {
		return nil, err
	}
	reg, err := aggregate.NewRegistry(Account())
	if err != nil {
		return nil, err
	}
	log := e.node.Log()
	newRepo := func(cache, snapEvery int) *aggregate.Repository {
		return aggregate.NewRepository(log, snaps, reg, aggregate.Config{Namespace: e.ns, CacheSize: cache, SnapshotEvery: snapEvery}, nil)
	}
	// Fill with a repository of its own that snapshots every 100 events:
	// the last snapshot is at event 1,000, whatever the config says. A
	// sweep fills once and every worker count reads the same aggregate; a
	// fill that failed part way is abandoned, and the next count fills a
	// fresh aggregate (a second fill of the same one would make it 2,000).
	if e.loadID == "" {
		e.loadFills++
		id := fmt.Sprintf("load-1000-%d", e.loadFills)
		filler := newRepo(0, 100)
		for range loadEvents {
			if _, err := filler.Handle(ctx, aggregate.Request{Type: "acct", ID: id, Kind: "deposit", Payload: depositBody}); err != nil {
				return nil, fmt.Errorf("fill: %w", err)
			}
		}
		e.loadID = id
	}
	id := e.loadID
	withSnap, noSnap := newRepo(-1, 100), newRepo(-1, -1)
	subject, err := names.AggregateSubject("acct", id)
	if err != nil {
		return nil, err
	}
	// The raw floor: the same batched direct gets over one shared reply
	// subscription that Log.Load uses, touching only the bytes.
	scanner := streams.NewScanner(e.nodeJS, names.Events, 1000)
	defer scanner.Close()
	esLoad := func(repo *aggregate.Repository) Op {
		return func(ctx context.Context, w int) (bool, error) {
			st, err := repo.Get(ctx, "acct", id)
			if err == nil && st.Position.Version != loadEvents {
				err = fmt.Errorf("loaded version %d, want %d", st.Position.Version, loadEvents)
			}
			return false, err
		}
	}
	rawLoad := func(ctx context.Context, w int) (bool, error) {
		size := 0
		n, err := scanner.Scan(ctx, streams.ScanRange{Filter: subject}, func(m *jetstream.RawStreamMsg) error {
			size += len(m.Data)
			return nil
		})
		if err == nil && (n != loadEvents || size == 0) {
			err = fmt.Errorf("raw read %d messages, want %d", n, loadEvents)
		}
		return false, err
	}
	p := e.planFor(3)
	side := func(op Op) func(ctx context.Context, i int) Result {
		return func(ctx context.Context, i int) Result { return RunOps(ctx, p.spec(i, 1, 0, nil, nil), op) }
	}
	res := interleave(ctx, p, progress, side(esLoad(noSnap)), side(esLoad(withSnap)), side(rawLoad))
	full := Phase{Name: PhaseLoad, Description: "cold load of a 1,000-event aggregate, snapshots off (cache off) vs raw batched direct get of its messages", Unit: "load"}
	full.pair(&res[0], &res[2])
	snap := Phase{Name: PhaseLoad + "-snap", Description: "cold load of the same aggregate from its snapshot (taken at event 1,000) + tail check, vs the same raw read of all 1,000 messages", Unit: "load"}
	snap.pair(&res[1], &res[2])
	return []Phase{full, snap}, nil
}

package streams

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
)

// The whole log contract holds with group commit on (batches from two
// queued appends, so the concurrent cases form batches).
func TestLogContractR1GroupCommit(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t, natstest.SyncAlways())
	mk := provisioned([]*server.Server{s}, 1)
	runContract(t, func(t *testing.T, cfg Config) *harness {
		cfg.GroupCommit = GroupCommit{MinBatch: 2}
		return mk(t, cfg)
	})
}

// An older EVENTS stream without atomic publish is updated in place.
func TestProvisionTurnsAtomicPublishOnForAnOldEventLog(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	names := NamesFor(ns)
	old := StreamConfigs(names, ProvisionConfig{})[0]
	old.AllowAtomicPublish = false
	if _, err := js.CreateStream(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	changes, err := Provision(t.Context(), js, ns, ProvisionConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := changesByName(t, changes)[names.Events]; c.Action != "updated" || len(c.Fields) != 1 || c.Fields[0] != "allow_atomic: false → true" {
		t.Errorf("EVENTS change %+v, want allow_atomic updated", c)
	}
	if !streamInfo(t, js, names.Events).Config.AllowAtomicPublish {
		t.Error("EVENTS does not allow atomic publish after provisioning")
	}
}

// queued runs appends while the committer is held busy, so that all of
// them wait in its queue, then lets them go as one round. It returns each
// append's record and error, in order.
func queued(t *testing.T, h *harness, ds []Decision, afters []Position) ([]Record, []error) {
	t.Helper()
	c := h.log.commit
	c.mu.Lock()
	c.busy = true
	c.mu.Unlock()
	recs, errs := make([]Record, len(ds)), make([]error, len(ds))
	var wg sync.WaitGroup
	for i := range ds {
		wg.Go(func() { recs[i], errs[i] = h.log.Append(t.Context(), ds[i], afters[i]) })
		// One at a time, so the queue (and the batch) keeps this order.
		natstest.Eventually(t, 5*time.Second, func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return len(c.queue) == i+1
		})
	}
	go c.drain()
	wg.Wait()
	return recs, errs
}

func groupHarness(t *testing.T) *harness {
	s := natstest.RunServer(t)
	return provisioned([]*server.Server{s}, 1)(t, Config{GroupCommit: GroupCommit{MinBatch: 2}})
}

// Queued appends are stored as one atomic batch, each at its own
// sequence with its own id.
func TestGroupCommitStoresQueuedAppendsAsOneBatch(t *testing.T) {
	t.Parallel()
	h := groupHarness(t)
	var ds []Decision
	for i := range 5 {
		ds = append(ds, decision("order", fmt.Sprintf("b%d", i), "placed"))
	}
	recs, errs := queued(t, h, ds, make([]Position, len(ds)))
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		got := mustLast(t, h, "order", ds[i].AggregateID)
		if got.Seq != recs[i].Seq || got.ID != ds[i].ID {
			t.Errorf("append %d: returned seq %d, stored seq %d id %s, want id %s", i, recs[i].Seq, got.Seq, got.ID, ds[i].ID)
		}
	}
	if st := h.log.CommitStats(); st.Batches != 1 || st.Batched != 5 {
		t.Errorf("stats %+v, want one batch of 5", st)
	}
}

// A stale expectation in the middle of a batch fails only that append, as
// a conflict with the actual position; the others are committed again
// without it.
func TestGroupCommitSplitsOffAStaleExpectation(t *testing.T) {
	t.Parallel()
	h := groupHarness(t)
	moved := mustAppend(t, h, decision("order", "moved", "placed"), Position{})
	ds := []Decision{decision("order", "s1", "placed"), decision("order", "moved", "paid"), decision("order", "s2", "placed")}
	recs, errs := queued(t, h, ds, make([]Position, 3)) // "moved" is not new any more
	var conflict *ConflictError
	if !errors.As(errs[1], &conflict) || conflict.Actual.Seq != moved.Seq {
		t.Fatalf("stale append: %v, want a conflict at seq %d", errs[1], moved.Seq)
	}
	for _, i := range []int{0, 2} {
		if errs[i] != nil {
			t.Fatalf("append %d beside the stale one: %v", i, errs[i])
		}
		if got := mustLast(t, h, "order", ds[i].AggregateID); got.Seq != recs[i].Seq || got.ID != ds[i].ID {
			t.Errorf("append %d: stored %s at %d, returned %d", i, got.ID, got.Seq, recs[i].Seq)
		}
	}
	if st := h.log.CommitStats(); st.Splits != 1 || st.Batches != 1 || st.Batched != 2 {
		t.Errorf("stats %+v, want one split and a batch of the other 2", st)
	}
}

// A decision retried after it committed (its reply lost) in a batch gets
// the original record back; the others commit.
func TestGroupCommitRetryOfACommittedDecisionInABatch(t *testing.T) {
	t.Parallel()
	h := groupHarness(t)
	d := decision("order", "done", "placed")
	orig := mustAppend(t, h, d, Position{})
	ds := []Decision{decision("order", "r1", "placed"), d, decision("order", "r2", "placed")}
	recs, errs := queued(t, h, ds, make([]Position, 3))
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if recs[1].Seq != orig.Seq || recs[1].ID != d.ID {
		t.Errorf("retry returned seq %d id %s, want the original %d %s", recs[1].Seq, recs[1].ID, orig.Seq, d.ID)
	}
	if n := msgCount(t, h); n != 3 {
		t.Errorf("%d messages stored, want 3", n)
	}
}

// A decision id already used on another aggregate fails the whole batch
// with 10201 and no position: the members are published one by one, the
// duplicate is refused and the others commit.
func TestGroupCommitFallsBackOnADuplicateID(t *testing.T) {
	t.Parallel()
	h := groupHarness(t)
	first := mustAppend(t, h, decision("order", "first", "placed"), Position{})
	dup := decision("order", "other", "placed")
	dup.ID = first.ID
	ds := []Decision{decision("order", "d1", "placed"), dup, decision("order", "d2", "placed")}
	_, errs := queued(t, h, ds, make([]Position, 3))
	if !errors.Is(errs[1], ErrDuplicateDecisionID) {
		t.Errorf("duplicate id: %v, want ErrDuplicateDecisionID", errs[1])
	}
	for _, i := range []int{0, 2} {
		if errs[i] != nil {
			t.Fatalf("append %d beside the duplicate: %v", i, errs[i])
		}
		if got := mustLast(t, h, "order", ds[i].AggregateID); got.ID != ds[i].ID {
			t.Errorf("append %d: stored %s", i, got.ID)
		}
	}
	if st := h.log.CommitStats(); st.Fallbacks != 1 || st.Batches != 0 {
		t.Errorf("stats %+v, want one fallback and no batch", st)
	}
}

// A batch whose commit reply is lost (stored, then a timeout) is ambiguous
// for every member: each resolves to its stored record by its decision id,
// and nothing is stored twice.
func TestGroupCommitBatchTimeoutResolvesEachMember(t *testing.T) {
	t.Parallel()
	h := groupHarness(t)
	h.log.commit.afterCommit = func(error) error { return context.DeadlineExceeded }
	var ds []Decision
	for i := range 4 {
		ds = append(ds, decision("order", fmt.Sprintf("t%d", i), "placed"))
	}
	recs, errs := queued(t, h, ds, make([]Position, len(ds)))
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append %d after a lost batch reply: %v", i, err)
		}
		if got := mustLast(t, h, "order", ds[i].AggregateID); got.Seq != recs[i].Seq || got.ID != ds[i].ID {
			t.Errorf("append %d: returned seq %d, stored %s at %d", i, recs[i].Seq, got.ID, got.Seq)
		}
	}
	if n := msgCount(t, h); n != 4 {
		t.Errorf("%d messages stored, want 4", n)
	}
}

func mustLast(t *testing.T, h *harness, typ, id string) Record {
	t.Helper()
	recs, err := h.log.Load(t.Context(), typ, id, Position{})
	if err != nil || len(recs) == 0 {
		t.Fatalf("load %s/%s: %d records, %v", typ, id, len(recs), err)
	}
	return recs[len(recs)-1]
}

// A hub's workers group-commit their receipts too: ProvisionHub opens the
// receipts bucket's stream to atomic publish as Provision does.
func TestProvisionHubOpensTheReceiptsToAtomicPublish(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	names := NamesFor(ns)
	if _, err := ProvisionHub(t.Context(), js, ns, ProvisionConfig{}, HubConfig{Sites: []string{"s1"}, HubKinds: []string{"pay"}}, nil); err != nil {
		t.Fatal(err)
	}
	if !streamInfo(t, js, "KV_"+names.Receipts).Config.AllowAtomicPublish {
		t.Error("the hub's receipts bucket does not allow atomic publish")
	}
}

// streams.compression reaches a hub's existing streams as it does a site's
// (the hub's own update step had left it out).
func TestProvisionHubUpdatesCompression(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	names := NamesFor(ns)
	h := HubConfig{Sites: []string{"s1"}}
	if _, err := ProvisionHub(t.Context(), js, ns, ProvisionConfig{}, h, nil); err != nil {
		t.Fatal(err)
	}
	changes, err := ProvisionHub(t.Context(), js, ns, ProvisionConfig{Compression: true}, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := changesByName(t, changes)[names.Events]; c.Action != "updated" {
		t.Errorf("hub EVENTS change %+v, want compression updated", c)
	}
	if got := streamInfo(t, js, names.Events).Config.Compression; got != jetstream.S2Compression {
		t.Errorf("hub EVENTS compression %v, want s2", got)
	}
}

// After a large round, the next one waits (up to Linger) for as many
// appends as the last round had: the writers coming back go out as one
// batch, not one by one as each arrives.
func TestGroupCommitLingersForTheLastRoundsWritersToComeBack(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	h := provisioned([]*server.Server{s}, 1)(t, Config{GroupCommit: GroupCommit{MinBatch: 2, Linger: time.Minute, LingerFrom: 3}})
	var first []Decision
	for i := range 3 {
		first = append(first, decision("order", fmt.Sprintf("l%d", i), "placed"))
	}
	if _, errs := queued(t, h, first, make([]Position, 3)); errors.Join(errs...) != nil {
		t.Fatal(errs)
	}
	// The round lingers now: three appends arriving one after another
	// (each alone would be published at once) wait for each other.
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		wg.Go(func() {
			_, errs[i] = h.log.Append(t.Context(), decision("order", fmt.Sprintf("m%d", i), "placed"), Position{})
		})
		natstest.Eventually(t, 5*time.Second, func() bool {
			h.log.commit.mu.Lock()
			defer h.log.commit.mu.Unlock()
			return len(h.log.commit.queue) == i+1 || i == 2
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if st := h.log.CommitStats(); st.Batches != 2 || st.Batched != 6 || st.Plain != 0 {
		t.Fatalf("stats %+v, want two batches of 3 and nothing alone", st)
	}
}

// A lingering round that waits in vain goes out at its deadline with what
// it has.
func TestGroupCommitLingerEndsAtItsDeadline(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	h := provisioned([]*server.Server{s}, 1)(t, Config{GroupCommit: GroupCommit{MinBatch: 2, Linger: 200 * time.Millisecond, LingerFrom: 3}})
	var first []Decision
	for i := range 3 {
		first = append(first, decision("order", fmt.Sprintf("d%d", i), "placed"))
	}
	if _, errs := queued(t, h, first, make([]Position, 3)); errors.Join(errs...) != nil {
		t.Fatal(errs)
	}
	if _, err := h.log.Append(t.Context(), decision("order", "alone", "placed"), Position{}); err != nil {
		t.Fatal(err)
	}
	if st := h.log.CommitStats(); st.Batches != 1 || st.Plain != 1 {
		t.Fatalf("stats %+v, want the batch of 3 and the lone append published on its own", st)
	}
}

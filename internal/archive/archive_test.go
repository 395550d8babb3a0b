package archive_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/archive"
	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// tally is a counter that closes.
type tally struct {
	N      int  `json:"n"`
	Closed bool `json:"closed"`
}

type add struct {
	By int `json:"by"`
}

func tallyDef() *aggregate.Definition {
	d := aggregate.Define("tally", 1, func(s tally, e aggregate.Event) tally {
		switch e.Type {
		case "added":
			var a add
			_ = e.Decode(&a)
			s.N += a.By
		case "closed":
			s.Closed = true
		}
		return s
	})
	aggregate.On(d, "add", func(s tally, c add) (aggregate.Decision, error) { return aggregate.Emit("added", c), nil })
	aggregate.On(d, "close", func(s tally, c struct{}) (aggregate.Decision, error) { return aggregate.Emit("closed", nil), nil })
	return d.Definition()
}

type fixture struct {
	js    jetstream.JetStream
	log   *streams.Log
	repo  *aggregate.Repository
	def   *aggregate.Definition
	store archive.Store
	a     *archive.Archiver
}

func newFixture(t *testing.T, state func(archive.StateFunc) archive.StateFunc) *fixture {
	t.Helper()
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv)
	ns := natstest.Namespace(t)
	if _, err := streams.Provision(t.Context(), js, ns, streams.ProvisionConfig{Archive: true}, nil); err != nil {
		t.Fatal(err)
	}
	log, err := streams.Open(t.Context(), js, ns, streams.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := js.KeyValue(t.Context(), streams.NamesFor(ns).Snapshots)
	if err != nil {
		t.Fatal(err)
	}
	def := tallyDef()
	reg, err := aggregate.NewRegistry(def)
	if err != nil {
		t.Fatal(err)
	}
	repo := aggregate.NewRepository(log, snaps, reg, aggregate.Config{Namespace: ns}, nil)
	store := archive.Dir(t.TempDir())
	log.SetArchive(archive.Reader(store, log))
	sf := archive.StateFunc(func(ctx context.Context, typ, id string, at wire.Position) (json.RawMessage, int, int, error) {
		st, schema, out, err := repo.ArchiveState(ctx, typ, id, at)
		if errors.Is(err, aggregate.ErrConflict) {
			err = errors.Join(archive.ErrMoved, err)
		}
		return st, schema, out, err
	})
	if state != nil {
		sf = state(sf)
	}
	a := archive.New(js, log, store, sf, archive.Config{Rules: map[string]archive.Rule{"tally": {ClosedBy: []string{"closed"}}}}, nil)
	return &fixture{js: js, log: log, repo: repo, def: def, store: store, a: a}
}

func (f *fixture) send(t *testing.T, id, kind, payload string) aggregate.Result {
	t.Helper()
	res, err := f.repo.Handle(t.Context(), aggregate.Request{Type: "tally", ID: id, Kind: kind, Payload: json.RawMessage(payload)})
	if err != nil {
		t.Fatalf("%s %s: %v", kind, id, err)
	}
	return res
}

func (f *fixture) history(t *testing.T, id string) []streams.Record {
	t.Helper()
	recs, err := f.log.History(t.Context(), "tally", id)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func (f *fixture) messages(t *testing.T, id string) uint64 {
	t.Helper()
	c, err := f.log.SubjectCounts(t.Context(), "tally")
	if err != nil {
		t.Fatal(err)
	}
	return c[f.log.Names().TypePrefix("tally")+id]
}

func sameRecords(t *testing.T, what string, got, want []streams.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, _ := json.Marshal(got[i])
		w, _ := json.Marshal(want[i])
		if !bytes.Equal(g, w) {
			t.Errorf("%s: record %d\n%s\nwant\n%s", what, i, g, w)
		}
	}
}

func TestObjectRoundTripsAndRefusesDamage(t *testing.T) {
	o := archive.Object{Subject: "ns.evt.t.1", AggregateType: "t", AggregateID: "1", FirstSeq: 3, LastSeq: 9,
		Messages: []archive.Message{{Seq: 3, Subject: "ns.evt.t.1", Time: time.Unix(1, 5).UTC(), Headers: map[string][]string{"A": {"b"}}, Data: []byte(`{"x":1}`)}}}
	data, err := archive.Encode(&o)
	if err != nil {
		t.Fatal(err)
	}
	back, err := archive.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.SHA256 != o.SHA256 || back.Count != 1 || string(back.Messages[0].Data) != `{"x":1}` || !back.Messages[0].Time.Equal(o.Messages[0].Time) {
		t.Errorf("round trip: %+v", back)
	}
	damaged := bytes.Replace(data, []byte(`"seq":3`), []byte(`"seq":4`), 1)
	if _, err := archive.Decode(damaged); err == nil {
		t.Error("a damaged object decoded")
	}
	if _, err := archive.Decode([]byte(`{"format":"other","version":1}`)); err == nil {
		t.Error("a foreign object decoded")
	}
}

// An archived aggregate reads the same history (from the archive) and
// state (from its tombstone); a command restores it, and archived again
// its history chains both archives.
func TestArchiveRestoreAndArchiveAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.send(t, "c1", "add", `{"by":2}`)
	f.send(t, "c1", "add", `{"by":3}`)
	f.send(t, "c1", "close", `{}`)
	f.send(t, "open", "add", `{"by":1}`)
	before := f.history(t, "c1")
	p, err := f.a.Run(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Archived != 1 || p.Open != 1 || p.Decisions != 3 {
		t.Fatalf("first run: %+v", p)
	}
	if n := f.messages(t, "c1"); n != 1 {
		t.Fatalf("c1 holds %d messages after archiving, want its tombstone", n)
	}
	after := f.history(t, "c1")
	sameRecords(t, "history after archiving", after[:len(after)-1], before)
	tomb, ok, err := wire.TombstoneOf(after[len(after)-1])
	if !ok || err != nil || tomb.Decisions != 3 || tomb.LastVersion != 3 || after[len(after)-1].LastVersion() != 4 {
		t.Fatalf("tombstone %+v (%v %v), version %d", tomb, ok, err, after[len(after)-1].LastVersion())
	}
	if f.log.ArchiveReads() == 0 {
		t.Error("the history read did not count its fall-through to the archive")
	}
	// A fresh repository (a restarted node) loads the state from the tombstone.
	reg, _ := aggregate.NewRegistry(f.def)
	snaps, _ := f.js.KeyValue(t.Context(), f.log.Names().Snapshots)
	cold := aggregate.NewRepository(f.log, snaps, reg, aggregate.Config{Namespace: f.log.Names().Namespace}, nil)
	st, err := cold.Get(t.Context(), "tally", "c1")
	if err != nil || st.Value.(tally) != (tally{N: 5, Closed: true}) || st.Position.Version != 4 {
		t.Fatalf("state from the tombstone: %+v %v", st, err)
	}
	// Restore: the command is decided on that state, after the tombstone.
	res, err := cold.Handle(t.Context(), aggregate.Request{Type: "tally", ID: "c1", Kind: "add", Payload: json.RawMessage(`{"by":10}`)})
	if err != nil || res.Version != 5 {
		t.Fatalf("a command to the archived aggregate: %+v %v", res, err)
	}
	if st, _ := cold.Get(t.Context(), "tally", "c1"); st.Value.(tally).N != 15 {
		t.Fatalf("restored state %+v", st)
	}
	if _, err := cold.Handle(t.Context(), aggregate.Request{Type: "tally", ID: "c1", Kind: "close", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	middle := f.history(t, "c1")
	if p, err = f.a.Run(t.Context(), nil); err != nil || p.Archived != 1 {
		t.Fatalf("second run: %+v %v", p, err)
	}
	again := f.history(t, "c1")
	sameRecords(t, "history after archiving twice", again[:len(again)-1], middle)
	if n := f.messages(t, "c1"); n != 1 {
		t.Fatalf("c1 holds %d messages after archiving twice", n)
	}
	// Refused, when the type says so.
	f.def.SetArchived(aggregate.ArchivedRefuse)
	defer f.def.SetArchived(aggregate.ArchivedRestore)
	if _, err := cold.Handle(t.Context(), aggregate.Request{Type: "tally", ID: "c1", Kind: "add", Payload: json.RawMessage(`{"by":1}`)}); !errors.Is(err, aggregate.ErrArchived) {
		t.Fatalf("a command to an archived aggregate of a refusing type: %v", err)
	}
}

// A decision appended while the aggregate is being archived wins: the
// tombstone's expectation fails, nothing is purged, the history stays.
func TestArchiveStopsCleanlyOnAConcurrentDecision(t *testing.T) {
	t.Parallel()
	var f *fixture
	f = newFixture(t, func(next archive.StateFunc) archive.StateFunc {
		return func(ctx context.Context, typ, id string, at wire.Position) (json.RawMessage, int, int, error) {
			st, schema, out, err := next(ctx, typ, id, at)
			f.send(t, id, "add", `{"by":100}`) // after the state was read, before the tombstone
			return st, schema, out, err
		}
	})
	f.send(t, "c2", "add", `{"by":1}`)
	f.send(t, "c2", "close", `{}`)
	p, err := f.a.Run(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Aborted != 1 || p.Archived != 0 {
		t.Fatalf("run: %+v", p)
	}
	recs := f.history(t, "c2")
	if len(recs) != 3 || wire.IsTombstone(recs[len(recs)-1]) || f.messages(t, "c2") != 3 {
		t.Fatalf("after an aborted archive: %d records, %d messages", len(recs), f.messages(t, "c2"))
	}
}

// On an EVENTS created without archiving (deny_purge), a run refuses.
func TestArchiveRefusesALogThatDeniesPurges(t *testing.T) {
	t.Parallel()
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv)
	ns := natstest.Namespace(t)
	if _, err := streams.Provision(t.Context(), js, ns, streams.ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	log, err := streams.Open(t.Context(), js, ns, streams.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := archive.New(js, log, archive.Dir(t.TempDir()), nil, archive.Config{Rules: map[string]archive.Rule{"tally": {ClosedBy: []string{"closed"}}}}, nil)
	if _, err := a.Run(t.Context(), nil); !errors.Is(err, archive.ErrPurgeDenied) {
		t.Fatalf("run on a log that denies purges: %v", err)
	}
	// provision with archiving configured cannot change that, and says so
	// without failing.
	if _, err := streams.Provision(t.Context(), js, ns, streams.ProvisionConfig{Archive: true}, nil); err != nil {
		t.Fatalf("provision with archiving on an older log: %v", err)
	}
}

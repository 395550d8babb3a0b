package aggregate

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/shred"
	"github.com/esjet/esjet/internal/streams"
)

type member struct {
	Name   string `json:"name" esjet:"personal,subject=name"`
	City   string `json:"city"`
	Joined int    `json:"joined"`
}

type joined struct {
	Name string `json:"name" esjet:"personal,subject=name"`
	City string `json:"city"`
}

type welcome struct {
	Name string `json:"name" esjet:"personal,subject=name"`
}

// newSealedFixture is newFixture with the namespace's keyring, a sealer
// over it and a log that opens what it seals.
func newSealedFixture(t *testing.T, srv *server.Server) (*fixture, *shred.Keyring, *shred.Sealer, *streams.Log) {
	t.Helper()
	f := newFixture(t, srv)
	ring, err := shred.Open(t.Context(), f.js, f.ns, 1)
	if err != nil {
		t.Fatal(err)
	}
	sealer := &shred.Sealer{Keys: ring}
	log, err := streams.Open(t.Context(), f.js, f.ns, streams.Config{Open: func(rec *streams.Record) error {
		return sealer.OpenRecord(t.Context(), rec)
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.log = log
	return f, ring, sealer, log
}

func memberDef() *Definition {
	d := Define("member", 1, func(s member, e Event) member {
		var j joined
		_ = e.Decode(&j)
		s.Name, s.City = j.Name, j.City
		s.Joined++
		return s
	})
	On(d, "join", func(s member, c joined) (Decision, error) {
		return Emit("joined", c).Issue("welcome", welcome{Name: c.Name}), nil
	})
	return d.Definition()
}

// TestPersonalSealedAndForgotten: a decision's tagged fields and the
// snapshot's reach JetStream sealed, the cache and the result keep the
// plaintext, a cold load opens them, and after a forget a cold load (from
// the snapshot and from the log) reads them erased while the rest stays.
func TestPersonalSealedAndForgotten(t *testing.T) {
	srv := natstest.RunServer(t)
	f, ring, sealer, log := newSealedFixture(t, srv)
	cfg := Config{Sealer: sealer, SnapshotEvery: 1}
	r := f.repo(t, cfg, memberDef())
	cmd := Request{Type: "member", ID: "m1", Kind: "join", Payload: json.RawMessage(`{"name":"Ada Lovelace","city":"London"}`)}
	if _, err := r.Handle(t.Context(), cmd); err != nil {
		t.Fatal(err)
	}
	st, err := r.Get(t.Context(), "member", "m1")
	if err != nil || st.Value.(member).Name != "Ada Lovelace" {
		t.Fatalf("cached state %+v %v", st.Value, err)
	}
	raw, err := f.js.Stream(t.Context(), streams.NamesFor(f.ns).Events)
	if err != nil {
		t.Fatal(err)
	}
	m, err := raw.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(m.Data, []byte("Lovelace")) || !bytes.Contains(m.Data, []byte("London")) {
		t.Fatalf("stored decision: %s", m.Data)
	}
	snap, err := f.snaps.Get(t.Context(), "member.m1")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(snap.Value(), []byte("Lovelace")) || !bytes.Contains(snap.Value(), []byte("London")) {
		t.Fatalf("stored snapshot: %s", snap.Value())
	}
	if st, err := f.repo(t, cfg, memberDef()).Get(t.Context(), "member", "m1"); err != nil || st.Value.(member).Name != "Ada Lovelace" {
		t.Fatalf("cold load: %+v %v", st.Value, err)
	}
	recs, err := log.Load(t.Context(), "member", "m1", streams.Position{})
	if err != nil || !bytes.Contains(recs[0].Commands[0].Payload, []byte("Ada Lovelace")) {
		t.Fatalf("history: %v %v", recs, err)
	}

	if _, err := ring.Forget(t.Context(), "Ada Lovelace", "test"); err != nil {
		t.Fatal(err)
	}
	r.Forgotten()
	for _, snapshots := range []bool{true, false} {
		if !snapshots {
			if err := f.snaps.Delete(t.Context(), "member.m1"); err != nil {
				t.Fatal(err)
			}
		}
		st, err := f.repo(t, cfg, memberDef()).Get(t.Context(), "member", "m1")
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Value.(member); got != (member{City: "London", Joined: 1}) {
			t.Errorf("after the forget (snapshot %v): %+v", snapshots, got)
		}
	}
	recs, err = log.Load(t.Context(), "member", "m1", streams.Position{})
	if err != nil {
		t.Fatal(err)
	}
	if d := string(recs[0].Events[0].Data); d != `{"city":"London","esjet:erased":["name"],"name":null}` {
		t.Errorf("event after the forget: %s", d)
	}

	// Without a keyring a personal decision is refused, not stored in plaintext.
	bare := f.repo(t, Config{}, memberDef())
	cmd.ID = "m2"
	if _, err := bare.Handle(t.Context(), cmd); !errors.Is(err, ErrInvalidDecision) {
		t.Errorf("no keyring: %v, want ErrInvalidDecision", err)
	}
}

// TestRawPersonalSealed: a raw type's personal fields, named in the
// configuration, are appended sealed.
func TestRawPersonalSealed(t *testing.T) {
	srv := natstest.RunServer(t)
	f := newFixture(t, srv)
	ring, err := shred.Open(t.Context(), f.js, f.ns, 1)
	if err != nil {
		t.Fatal(err)
	}
	reg := shred.Registry{"signup.user_registered": {Fields: []shred.Field{{Name: "email", Subject: "email"}, {Name: "name", Subject: "email"}}}}
	r := f.repo(t, Config{Sealer: &shred.Sealer{Keys: ring}, Personal: reg})
	_, err = r.AppendRaw(t.Context(), RawAppend{Type: "signup", ID: "u1", Events: []RawEvent{
		{Type: "user_registered", Data: json.RawMessage(`{"email":"ada@example.org","name":"Ada","plan":"gold"}`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.js.Stream(t.Context(), streams.NamesFor(f.ns).Events)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(m.Data, []byte("ada@example")) || bytes.Contains(m.Data, []byte(`"Ada"`)) || !bytes.Contains(m.Data, []byte("gold")) {
		t.Fatalf("stored raw decision: %s", m.Data)
	}
}

// TestRawForgedSealedValueRefused: a raw append may not plant a sealed
// value ({"esjet:sealed": …}) of its own — in a member its type marks
// personal or not, in an event or a command, spelled with a JSON escape or
// not. The log's reader opens every top-level sealed value, so one that
// does not open would fail every read of the record (the aggregate's
// history, the global log, the views) for everyone; nothing is written and
// the log stays readable.
func TestRawForgedSealedValueRefused(t *testing.T) {
	srv := natstest.RunServer(t)
	f, _, sealer, _ := newSealedFixture(t, srv)
	reg := shred.Registry{"signup.user_registered": {Fields: []shred.Field{{Name: "email", Subject: "email"}}}}
	r := f.repo(t, Config{Sealer: sealer, Personal: reg, RawCommands: map[string][]string{"signup": {"send_welcome"}}})
	const forged = `{"esjet:sealed":"v1.deadbeefdeadbeefdeadbeefdeadbeef.1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`
	escaped := strings.Replace(forged, "esjet:sealed", `esjet\u003asealed`, 1)
	for name, req := range map[string]RawAppend{
		"unmarked member":            {Events: []RawEvent{{Type: "user_registered", Data: json.RawMessage(`{"email":"a@example.org","plan":` + forged + `}`)}}},
		"personal member":            {Events: []RawEvent{{Type: "user_registered", Data: json.RawMessage(`{"email":` + forged + `}`)}}},
		"escaped":                    {Events: []RawEvent{{Type: "user_registered", Data: json.RawMessage(`{"email":"a@example.org","plan":` + escaped + `}`)}}},
		"type with nothing personal": {Events: []RawEvent{{Type: "note_added", Data: json.RawMessage(`{"text":` + forged + `}`)}}},
		"command payload": {Events: []RawEvent{{Type: "user_registered", Data: json.RawMessage(`{"email":"a@example.org"}`)}},
			Commands: []RawCommand{{Kind: "send_welcome", Payload: json.RawMessage(`{"to":` + forged + `}`)}}},
	} {
		req.Type, req.ID = "signup", "u1"
		if _, err := r.AppendRaw(t.Context(), req); !errors.Is(err, streams.ErrInvalidDecision) || !errors.Is(err, shred.ErrReserved) {
			t.Errorf("%s: err = %v, want invalid decision (reserved member)", name, err)
		}
	}
	st, err := f.js.Stream(t.Context(), streams.NamesFor(f.ns).Events)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(t.Context()); err != nil || info.State.Msgs != 0 {
		t.Fatalf("EVENTS after the refused appends: %+v %v", info.State, err)
	}
	// A plain value that merely mentions the word is stored, and the
	// history reads.
	if _, err := r.AppendRaw(t.Context(), RawAppend{Type: "signup", ID: "u1", Events: []RawEvent{
		{Type: "user_registered", Data: json.RawMessage(`{"email":"a@example.org","plan":"esjet:sealed","extra":{"esjet":1}}`)},
	}}); err != nil {
		t.Fatal(err)
	}
	if recs, err := f.log.ReadFrom(t.Context(), 1, 10); err != nil || len(recs) != 1 {
		t.Fatalf("the log after the plain append: %d records, %v", len(recs), err)
	}
}

// TestRawOlderShapeOfPersonalEventRefused: a raw event written at a schema
// older than the one its personal fields are named for is refused (it may
// name them otherwise — "mail" before it was renamed "email" — and would be
// stored in plaintext, readable after a forget); at the current schema it
// is sealed.
func TestRawOlderShapeOfPersonalEventRefused(t *testing.T) {
	srv := natstest.RunServer(t)
	f := newFixture(t, srv)
	ring, err := shred.Open(t.Context(), f.js, f.ns, 1)
	if err != nil {
		t.Fatal(err)
	}
	reg := shred.Registry{"signup.user_registered": {Fields: []shred.Field{{Name: "email", Subject: "user_id"}}, Schema: 2}}
	r := f.repo(t, Config{Sealer: &shred.Sealer{Keys: ring}, Personal: reg})
	for _, schema := range []int{0, 1} {
		_, err := r.AppendRaw(t.Context(), RawAppend{Type: "signup", ID: "u1", Events: []RawEvent{
			{Type: "user_registered", Schema: schema, Data: json.RawMessage(`{"user_id":"42","mail":"vic@example.org"}`)},
		}})
		if !errors.Is(err, streams.ErrInvalidDecision) || !strings.Contains(err.Error(), "schema 2") {
			t.Errorf("schema %d: err = %v, want invalid decision naming schema 2", schema, err)
		}
	}
	if _, err := r.AppendRaw(t.Context(), RawAppend{Type: "signup", ID: "u1", Events: []RawEvent{
		{Type: "user_registered", Schema: 2, Data: json.RawMessage(`{"user_id":"42","email":"vic@example.org"}`)},
	}}); err != nil {
		t.Fatal(err)
	}
	st, err := f.js.Stream(t.Context(), streams.NamesFor(f.ns).Events)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil || info.State.Msgs != 1 {
		t.Fatalf("EVENTS: %+v %v, want the one current-schema decision", info.State, err)
	}
	m, err := st.GetMsg(t.Context(), 1)
	if err != nil || bytes.Contains(m.Data, []byte("vic@example")) {
		t.Fatalf("stored: %s %v", m.Data, err)
	}
}

// TestForgetDuringCommandCachesNoPlaintext: a forget that lands while a
// command of the subject's aggregate is being decided (the node's keys
// watch calls Forgotten) must not see that command put the state — folded
// from the plaintext — back into the cache afterwards, nor snapshot it:
// reads would show the forgotten person, and the snapshot would seal the
// data anew under a key that survives.
func TestForgetDuringCommandCachesNoPlaintext(t *testing.T) {
	srv := natstest.RunServer(t)
	f, _, sealer, _ := newSealedFixture(t, srv)
	var r *Repository
	forgetNow := false
	d := Define("member", 1, func(s member, e Event) member {
		var j joined
		_ = e.Decode(&j)
		s.Name, s.City = j.Name, j.City
		s.Joined++
		return s
	})
	On(d, "join", func(s member, c joined) (Decision, error) {
		if forgetNow {
			r.Forgotten() // the watch saw the tombstone mid-command
		}
		return Emit("joined", c), nil
	})
	r = f.repo(t, Config{Sealer: sealer, SnapshotEvery: 1}, d.Definition())
	join := Request{Type: "member", ID: "m1", Kind: "join", Payload: json.RawMessage(`{"name":"Ada Lovelace","city":"London"}`)}
	if _, err := r.Handle(t.Context(), join); err != nil {
		t.Fatal(err)
	}
	snap, err := f.snaps.Get(t.Context(), snapshotKey("member", "m1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.cache.get("member/m1"); !ok {
		t.Fatal("the first command's state is not cached: the test proves nothing")
	}
	forgetNow = true
	if _, err := r.Handle(t.Context(), join); err != nil {
		t.Fatal(err)
	}
	if e, ok := r.cache.get("member/m1"); ok {
		t.Fatalf("after a forget mid-command the cache holds the state folded from the plaintext: %+v", e.state)
	}
	now, err := f.snaps.Get(t.Context(), snapshotKey("member", "m1"))
	if err != nil {
		t.Fatal(err)
	}
	if now.Revision() != snap.Revision() {
		t.Fatalf("the command decided across the forget wrote a snapshot (revision %d → %d)", snap.Revision(), now.Revision())
	}
	// A cold load (the cache cleared, nothing forgotten in the bucket)
	// caches again.
	forgetNow = false
	if _, err := r.Get(t.Context(), "member", "m1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.cache.get("member/m1"); !ok {
		t.Fatal("a load after the forget is not cached")
	}
}

// TestRawPersonalWithoutSubjectIsBadInput: a raw event with a personal
// field but no data subject to key it by (the subject member empty, or not
// a string) is the client's mistake — invalid_events, nothing written —
// not an internal error.
func TestRawPersonalWithoutSubjectIsBadInput(t *testing.T) {
	srv := natstest.RunServer(t)
	f := newFixture(t, srv)
	ring, err := shred.Open(t.Context(), f.js, f.ns, 1)
	if err != nil {
		t.Fatal(err)
	}
	reg := shred.Registry{"signup.user_registered": {Fields: []shred.Field{{Name: "name", Subject: "email"}}}}
	r := f.repo(t, Config{Sealer: &shred.Sealer{Keys: ring}, Personal: reg})
	for _, data := range []string{`{"name":"Ada"}`, `{"name":"Ada","email":""}`, `{"name":"Ada","email":42}`} {
		_, err := r.AppendRaw(t.Context(), RawAppend{Type: "signup", ID: "u1", Events: []RawEvent{{Type: "user_registered", Data: json.RawMessage(data)}}})
		if !errors.Is(err, streams.ErrInvalidDecision) || !errors.Is(err, shred.ErrNoSubject) {
			t.Errorf("%s: err = %v, want invalid decision (no subject)", data, err)
		}
	}
}

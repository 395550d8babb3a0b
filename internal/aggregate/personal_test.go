package aggregate

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

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
	cfg := Config{Sealer: sealer, SnapshotEvery: 1}
	r := f.repo(t, cfg, memberDef())
	cmd := Command{Type: "member", ID: "m1", Kind: "join", Payload: json.RawMessage(`{"name":"Ada Lovelace","city":"London"}`)}
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

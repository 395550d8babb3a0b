package projection

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/esjet/esjet/internal/shred"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// TestParkedPersonalEventKeepsNoPlaintext: a view not marked Personal (it
// keeps no personal data, so a forget does not reset it) parks an event
// whose decision holds sealed personal data. The parked record in the view
// bucket must not hold the plaintext the handler was given — it would stay
// there, and in backups, after the person is forgotten — and a retry after
// the forget applies the event as the log reads it now: erased.
func TestParkedPersonalEventKeepsNoPlaintext(t *testing.T) {
	t.Parallel()
	e, ring, rec := personalEnv(t)
	var broken atomic.Bool
	broken.Store(true)
	def := Definition{Name: "seen", Partitions: 2, Handle: func(ctx context.Context, tx *Tx, ev Event) error {
		if broken.Load() {
			return errors.New("cannot fold this")
		}
		return tx.Put(ev.AggregateID, string(ev.Data))
	}}
	e.run(t, testConfig(), def)
	v := NewViews(e.js, e.ns, 0)
	eventually(t, "the event parked", func() bool {
		ps, _ := v.Parked(t.Context(), "seen")
		return len(ps) == 1
	})
	ps, _ := v.Parked(t.Context(), "seen")
	if b, _ := json.Marshal(ps); strings.Contains(string(b), "Lovelace") || !ps[0].Reread {
		t.Fatalf("parked record: %s", b)
	}

	if _, err := ring.Forget(t.Context(), "Ada Lovelace", "ops"); err != nil {
		t.Fatal(err)
	}
	broken.Store(false)
	req, err := v.Retry(t.Context(), "seen", rec.EventPosition(0), "ops")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "retry done", func() bool { ok, _ := v.Done(t.Context(), "seen", req); return ok })
	doc, err := v.Get(t.Context(), "seen", "bad", Wait{})
	if err != nil {
		t.Fatal(err)
	}
	var got string
	_ = json.Unmarshal(doc.Value, &got)
	if strings.Contains(got, "Lovelace") || !strings.Contains(got, wire.ErasedMember) {
		t.Fatalf("the parked event retried after the forget was applied as %s, want it erased", got)
	}
}

// personalEnv is a namespace whose log opens sealed values, holding one
// decision of member/bad with Ada Lovelace's name sealed.
func personalEnv(t *testing.T) (*env, *shred.Keyring, streams.Record) {
	t.Helper()
	e := newEnv(t)
	ring, err := shred.Open(t.Context(), e.js, e.ns, 1)
	if err != nil {
		t.Fatal(err)
	}
	sealer := &shred.Sealer{Keys: ring}
	if e.log, err = streams.Open(t.Context(), e.js, e.ns, streams.Config{Open: func(rec *streams.Record) error {
		return sealer.OpenRecord(context.Background(), rec)
	}}, nil); err != nil {
		t.Fatal(err)
	}
	data, err := sealer.SealJSON(t.Context(), json.RawMessage(`{"name":"Ada Lovelace","n":1}`),
		shred.Spec{Fields: []shred.Field{{Name: "name", Subject: "name"}}})
	if err != nil {
		t.Fatal(err)
	}
	d := streams.Decision{ID: uuid.Must(uuid.NewV7()).String(), AggregateType: "member", AggregateID: "bad",
		Events: []streams.Event{{Type: "joined", Data: data}}}
	rec, err := e.log.Append(t.Context(), d, streams.Position{})
	if err != nil {
		t.Fatal(err)
	}
	return e, ring, rec
}

// TestSkipRecordKeepsNoEventData: an operator's skip of a stopped single
// projection's event leaves a record without the event's data — it outlives
// a forget of the person it may name (the log keeps the event, sealed).
func TestSkipRecordKeepsNoEventData(t *testing.T) {
	t.Parallel()
	e, _, rec := personalEnv(t)
	e.run(t, testConfig(), Definition{Name: "single", Handle: func(ctx context.Context, tx *Tx, ev Event) error {
		return errors.New("cannot fold this")
	}})
	v := NewViews(e.js, e.ns, 0)
	// Red may show before the owner's lease says where it stopped; a skip
	// is refused (and asks nothing) until it does.
	var req Request
	eventually(t, "stopped, and the skip asked", func() bool {
		var err error
		req, err = v.Skip(t.Context(), "single", rec.EventPosition(0), "ops", "cannot fold it")
		return err == nil
	})
	eventually(t, "skip done", func() bool { ok, _ := v.Done(t.Context(), "single", req); return ok })
	skips, err := v.Skips(t.Context(), "single")
	if err != nil || len(skips) != 1 {
		t.Fatalf("skip records: %+v %v", skips, err)
	}
	if b, _ := json.Marshal(skips); strings.Contains(string(b), "Lovelace") || skips[0].Event.Position != rec.EventPosition(0) {
		t.Fatalf("skip record: %s", b)
	}
}

package aggregate

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// TestRawKeyReusedAfterTheDedupWindowIsStillRefused: the idempotency promise
// lasts the horizon (24h), not the stream's dedup window (here 1s).
func TestRawKeyReusedAfterTheDedupWindowIsStillRefused(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	if _, err := streams.Provision(t.Context(), js, ns, streams.ProvisionConfig{DuplicateWindow: time.Second}, nil); err != nil {
		t.Fatal(err)
	}
	l, err := streams.Open(t.Context(), js, ns, streams.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := NewRegistry()
	r := NewRepository(l, nil, reg, Config{Namespace: ns, SnapshotEvery: -1}, nil)
	first := RawAppend{Type: "invoice", ID: "i1", IdempotencyKey: "k", Events: []RawEvent{{Type: "issued", Data: json.RawMessage(`{"n":1}`)}}}
	res, err := r.AppendRaw(t.Context(), first)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // let the 1s dedup window pass: nothing to poll
	other := RawAppend{Type: "invoice", ID: "i1", IdempotencyKey: "k", ExpectedVersion: 1, Events: []RawEvent{{Type: "paid"}}}
	if _, err := r.AppendRaw(t.Context(), other); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("same key, other body, after the dedup window: %v, want ErrKeyReused", err)
	}
	again, err := r.AppendRaw(t.Context(), first)
	if err != nil || !again.Replayed || again.Seq != res.Seq {
		t.Fatalf("retry of the first append: %+v %v", again, err)
	}
	recs, _ := l.Load(t.Context(), "invoice", "i1", streams.Position{})
	if len(recs) != 1 {
		t.Fatalf("%d decisions stored, want 1", len(recs))
	}
}

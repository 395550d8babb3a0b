package aggregate

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
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

// TestRawAppendIssuesOnlyTheConfiguredCommandKinds is issue 11 item 3: a
// made-up raw type evil issued book_flight and release_budget. A raw type
// issues only the kinds configured for it; anything else is refused and
// nothing is written.
func TestRawAppendIssuesOnlyTheConfiguredCommandKinds(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	if _, err := streams.Provision(t.Context(), js, ns, streams.ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	l, err := streams.Open(t.Context(), js, ns, streams.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := NewRegistry()
	r := NewRepository(l, nil, reg, Config{Namespace: ns, SnapshotEvery: -1,
		RawCommands: map[string][]string{"invoice": {"send_invoice"}}}, nil)
	ev := []RawEvent{{Type: "happened"}}
	for _, c := range []struct {
		typ   string
		cmds  []RawCommand
		allow []string
	}{
		{"evil", []RawCommand{{Kind: "book_flight"}}, nil},
		{"evil", []RawCommand{{Kind: "release_budget", Payload: json.RawMessage(`{"amount":1}`)}}, nil},
		{"invoice", []RawCommand{{Kind: "send_invoice"}, {Kind: "book_flight"}}, []string{"send_invoice"}},
	} {
		_, err := r.AppendRaw(t.Context(), RawAppend{Type: c.typ, ID: "x1", Events: ev, Commands: c.cmds})
		var rc *RawCommandError
		if !errors.As(err, &rc) || !errors.Is(err, ErrRawCommandNotAllowed) || !IsPermanent(err) {
			t.Fatalf("%s issuing %v: %v, want a permanent *RawCommandError", c.typ, c.cmds, err)
		}
		if rc.Type != c.typ || rc.Kind == "send_invoice" || !slices.Equal(rc.Allowed, c.allow) {
			t.Errorf("%s: error %+v, want the refused kind and the allowed %v", c.typ, rc, c.allow)
		}
		if !strings.Contains(err.Error(), "aggregates.raw."+c.typ+".commands") {
			t.Errorf("%s: %q does not say what to configure", c.typ, err)
		}
		if recs, _ := l.Load(t.Context(), c.typ, "x1", streams.Position{}); len(recs) != 0 {
			t.Fatalf("%s: %d decisions written, want none", c.typ, len(recs))
		}
	}
	res, err := r.AppendRaw(t.Context(), RawAppend{Type: "invoice", ID: "x1", Events: ev, Commands: []RawCommand{{Kind: "send_invoice"}}})
	if err != nil || len(res.Commands) != 1 {
		t.Fatalf("invoice issuing send_invoice: %+v %v", res, err)
	}
	if _, err := r.AppendRaw(t.Context(), RawAppend{Type: "evil", ID: "x2", Events: ev}); err != nil {
		t.Fatalf("events only, on a type with no commands configured: %v", err)
	}
}

// TestRawAppendRefusesReport: a raw type has no Decide, so nothing can
// hear a command's <kind>_done or <kind>_failed: a raw command asking for
// report is refused (nothing written) instead of having every outcome
// refused at the worker, one ERROR line per command.
func TestRawAppendRefusesReport(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	ns := natstest.Namespace(t)
	if _, err := streams.Provision(t.Context(), js, ns, streams.ProvisionConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	l, err := streams.Open(t.Context(), js, ns, streams.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := NewRegistry()
	r := NewRepository(l, nil, reg, Config{Namespace: ns, SnapshotEvery: -1, RawCommands: map[string][]string{"invoice": {"send_invoice"}}}, nil)
	ev := []RawEvent{{Type: "issued"}}
	_, err = r.AppendRaw(t.Context(), RawAppend{Type: "invoice", ID: "r1", Events: ev, Commands: []RawCommand{{Kind: "send_invoice", Report: true}}})
	if !errors.Is(err, streams.ErrInvalidDecision) || !IsPermanent(err) || !strings.Contains(err.Error(), `drop "report"`) {
		t.Fatalf("raw command with report: %v, want an invalid decision saying to drop report", err)
	}
	if recs, _ := l.Load(t.Context(), "invoice", "r1", streams.Position{}); len(recs) != 0 {
		t.Fatalf("%d decisions stored, want none", len(recs))
	}
	if _, err := r.AppendRaw(t.Context(), RawAppend{Type: "invoice", ID: "r1", Events: ev, Commands: []RawCommand{{Kind: "send_invoice"}}}); err != nil {
		t.Fatalf("the same command without report: %v", err)
	}
}

package aggregate

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// aggRef is typ/id as a validated aggregate; the tests name valid ones.
func aggRef(typ, id string) wire.AggregateRef {
	a, err := wire.NewAggregateRef(typ, id)
	if err != nil {
		panic(err)
	}
	return a
}

// badIDs are aggregate ids no subject may be built from: JetStream would
// split on '.', store '*' and '>' literally, and time out on an empty
// token.
var badIDs = []string{"", "a.b", "*", ">", "a b", "a\x00b", strings.Repeat("x", wire.MaxTokenLen+1)}

// The aggregate id is validated once, where a request comes in, and passed
// down as a wire.AggregateRef: every entry point of the repository and of
// the log under it must still refuse a bad id with a *wire.TokenError
// naming the aggregate id, and write nothing.
func TestABadAggregateIDGetsThroughNoEntryPoint(t *testing.T) {
	f := newFixture(t, natstest.RunServer(t))
	r := f.repo(t, Config{RawCommands: map[string][]string{"ledger": {"post"}}})
	ctx := t.Context()
	for _, id := range badIDs {
		entries := map[string]func(context.Context) error{
			"Handle": func(ctx context.Context) error {
				_, err := r.Handle(ctx, Request{Type: "account", ID: id, Kind: "open", Payload: json.RawMessage(`{}`)})
				return err
			},
			"Handle keyed": func(ctx context.Context) error {
				_, err := r.Handle(ctx, Request{Type: "account", ID: id, Kind: "open", Payload: json.RawMessage(`{}`), IdempotencyKey: "k"})
				return err
			},
			"HandleOutcome": func(ctx context.Context) error {
				_, err := r.HandleOutcome(ctx, Request{Type: "account", ID: id, Kind: DoneKind("notify"), Payload: json.RawMessage(`{"command_id":"account:x:1:0"}`)})
				return err
			},
			"Feedback.Report": func(ctx context.Context) error {
				err := r.Feedback(nil).Report(ctx, wire.Report{AggregateType: "account", AggregateID: id, Kind: DoneKind("notify"), Payload: []byte(`{"command_id":"account:x:1:0"}`)})
				if err != nil && !errors.Is(err, wire.ErrReportRefused) {
					t.Errorf("Feedback.Report(%q): %v is not final (wire.ErrReportRefused): the worker would report it for ever", id, err)
				}
				return err
			},
			"HandleAll": func(ctx context.Context) error {
				_, err := r.HandleAll(ctx, []MultiRequest{
					{Request: Request{Type: "account", ID: "fine", Kind: "open", Payload: json.RawMessage(`{}`)}},
					{Request: Request{Type: "account", ID: id, Kind: "open", Payload: json.RawMessage(`{}`)}},
				})
				return err
			},
			"AppendRaw": func(ctx context.Context) error {
				_, err := r.AppendRaw(ctx, RawAppend{Type: "ledger", ID: id, Events: []RawEvent{{Type: "posted", Data: json.RawMessage(`{}`)}}})
				return err
			},
			"AppendRaw keyed": func(ctx context.Context) error {
				_, err := r.AppendRaw(ctx, RawAppend{Type: "ledger", ID: id, IdempotencyKey: "k", Events: []RawEvent{{Type: "posted"}}})
				return err
			},
			"Get": func(ctx context.Context) error {
				_, err := r.Get(ctx, "account", id)
				return err
			},
			"ArchiveState": func(ctx context.Context) error {
				_, _, _, err := r.ArchiveState(ctx, "account", id, streams.Position{})
				return err
			},
			"streams.Log.Append": func(ctx context.Context) error {
				_, err := f.log.Append(ctx, streams.Decision{ID: "0190f4c2-7d3a-7c11-8a2b-3c4d5e6f7a8b", AggregateType: "ledger", AggregateID: id,
					Events: []streams.Event{{Type: "posted"}}}, streams.Position{})
				return err
			},
			"streams.Log.AppendAll": func(ctx context.Context) error {
				_, err := f.log.AppendAll(ctx, []streams.Decision{{ID: "0190f4c2-7d3a-7c11-8a2b-3c4d5e6f7a8c", AggregateType: "ledger", AggregateID: id,
					Events: []streams.Event{{Type: "posted"}}}}, []streams.Position{{}})
				return err
			},
			"streams.Log.Load": func(ctx context.Context) error {
				_, err := f.log.Load(ctx, "account", id, streams.Position{})
				return err
			},
		}
		for name, call := range entries {
			err := call(ctx)
			var te *wire.TokenError
			if !errors.As(err, &te) || te.Field != "aggregate id" || !IsPermanent(err) {
				t.Errorf("%s with id %q: %v, want a permanent *wire.TokenError for the aggregate id", name, id, err)
			}
		}
	}
	// A caller below the edge that made no AggregateRef is refused too,
	// rather than reading or writing an empty subject.
	var zero wire.AggregateRef
	if _, err := f.log.LoadTail(ctx, zero, streams.Position{}); !errors.Is(err, wire.ErrInvalidToken) {
		t.Errorf("LoadTail of the zero AggregateRef: %v, want wire.ErrInvalidToken", err)
	}
	if _, err := f.log.AppendTo(ctx, zero, streams.Decision{ID: "0190f4c2-7d3a-7c11-8a2b-3c4d5e6f7a8d", Events: []streams.Event{{Type: "posted"}}}, streams.Position{}); !errors.Is(err, wire.ErrInvalidToken) {
		t.Errorf("AppendTo the zero AggregateRef: %v, want wire.ErrInvalidToken", err)
	}
	if n := f.msgs(t); n != 0 {
		t.Errorf("EVENTS holds %d messages after bad ids only; want none", n)
	}
}

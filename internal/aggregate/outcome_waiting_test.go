package aggregate_test

import (
	"errors"
	"testing"

	"github.com/esjet/esjet"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/natstest"
)

type parcel struct{ Shipped, Packed bool }

// parcelDef issues ship (only ship_done registered) and pack (pack_done
// records nothing: a no-op) with Report.
func parcelDef() *esjet.Definition {
	def := esjet.Define("parcel", 1, func(s parcel, e esjet.Event) parcel { return s })
	esjet.On(def, "start", func(s parcel, _ struct{}) (esjet.Decision, error) {
		return esjet.Emit("started", struct{}{}).Issue("ship", struct{}{}).Issue("pack", struct{}{}), nil
	})
	esjet.On(def, esjet.DoneKind("ship"), func(s parcel, _ esjet.Outcome) (esjet.Decision, error) {
		return esjet.Emit("shipped", struct{}{}), nil
	})
	esjet.On(def, esjet.DoneKind("pack"), func(s parcel, _ esjet.Outcome) (esjet.Decision, error) {
		return esjet.Decision{}, nil
	})
	esjet.On(def, esjet.FailedKind("pack"), func(s parcel, _ esjet.Outcome) (esjet.Decision, error) {
		return esjet.Emit("pack_failed", struct{}{}), nil
	})
	return def.Definition()
}

// Issue 28 item 3: an outcome Decide turns into a no-op, or a _failed of a
// kind whose aggregate registered only _done, is refused with a reason
// (permanent, counted), never answered as if it had been taken into
// account while its command stays awaited.
func TestOutcomesThatWouldLeaveTheCommandAwaitedAreRefused(t *testing.T) {
	t.Parallel()
	st := newTripStore(t, natstest.RunServer(t))
	reg, err := aggregate.NewRegistry(parcelDef())
	if err != nil {
		t.Fatal(err)
	}
	r := aggregate.NewRepository(st.log, st.snaps, reg, aggregate.Config{Namespace: st.ns}, nil)
	ctx := t.Context()
	if _, err := r.Handle(ctx, aggregate.Request{Type: "parcel", ID: "p1", Kind: "start", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	out := func(kind, id string) aggregate.Request {
		return aggregate.Request{Type: "parcel", ID: "p1", Kind: kind, Payload: []byte(`{"command_id":"` + id + `"}`)}
	}
	for _, c := range []struct{ kind, id string }{{esjet.DoneKind("pack"), "parcel:p1:1:1"}, {esjet.FailedKind("ship"), "parcel:p1:1:0"}} {
		_, err := r.HandleOutcome(ctx, out(c.kind, c.id))
		var refused *aggregate.OutcomeRefusedError
		if !errors.As(err, &refused) || !aggregate.IsPermanent(err) || refused.CommandID != c.id || refused.Reason == "" {
			t.Fatalf("%s: %v, want a permanent refusal with a reason", c.kind, err)
		}
		t.Logf("%s: %v", c.kind, err)
	}
	if n := r.Stats().OutcomesRefused; n != 2 {
		t.Fatalf("outcomes refused: %d, want 2", n)
	}
}

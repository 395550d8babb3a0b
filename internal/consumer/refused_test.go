package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/wire"
)

// refusingFeedback refuses every outcome, as an aggregate whose Decide
// records nothing for it does.
type refusingFeedback struct{}

func (refusingFeedback) Report(context.Context, wire.Report) error {
	return fmt.Errorf("%w: ship_done refused by trip/r1: Decide recorded no event for it", wire.ErrReportRefused)
}

// Issue 28 item 3: an outcome the aggregate refuses does not leave its
// command awaited unseen: the receipt records the refusal and its reason.
func TestARefusedOutcomeIsRecordedInTheReceipt(t *testing.T) {
	s := natstest.RunServer(t)
	e := newWEnv(t, s)
	w, err := NewWorker(t.Context(), e.js, e.ns, fast("ship", HandlerFunc(func(context.Context, Delivery) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	})), refusingFeedback{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	id := e.command(t, "ship", "r1", `{}`)
	natstest.Eventually(t, 10*time.Second, func() bool {
		rc, ok := e.receipt(t, id)
		return ok && rc.OutcomeRefused != ""
	})
	rc, _ := e.receipt(t, id)
	if rc.Outcome != wire.OutcomeDone || !strings.Contains(rc.OutcomeRefused, "Decide recorded no event") {
		t.Fatalf("receipt %+v", rc)
	}
}

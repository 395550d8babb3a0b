package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/wire"
)

// The e2e phase: the whole loop, one command per operation — pay records
// paid and issues charge; the relay puts charge in OUTBOX; the node's
// no-op charge worker runs it and sends charge_done back; the operation
// ends when charged is recorded on the aggregate. There is no raw pair: raw
// JetStream has no such loop. After the rounds, the phase reads the stored
// times of a sample of the steps' writes: where a step's time goes (hops.go).

func (e *env) e2ePhase(ctx context.Context, progress func(float64)) ([]Phase, error) {
	var waiters sync.Map // aggregate id → chan time.Time (when charged was seen)
	sub, err := e.node.Broker().Conn().Subscribe(wire.NamesFor(e.ns).TypePrefix("acct")+"*", func(m *nats.Msg) {
		if m.Header.Get(wire.HeaderEventTypes) != "charged" {
			return
		}
		if ch, ok := waiters.LoadAndDelete(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]); ok { // <ns>.evt.acct.<id>
			ch.(chan time.Time) <- time.Now()
		}
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, err
	}
	var seq atomic.Int64
	var steps stepLog
	op := func(ctx context.Context, w int) (bool, error) {
		id := "e" + strconv.FormatInt(seq.Add(1), 10)
		ch := make(chan time.Time, 1)
		waiters.Store(id, ch)
		sent := time.Now()
		res, err := e.node.API().Send(ctx, "acct", id, "pay", depositBody, api.Meta{})
		if err == nil && len(res.Commands) != 1 {
			err = fmt.Errorf("%s: pay issued %d commands, want 1 (charge)", id, len(res.Commands))
		}
		if err != nil {
			waiters.Delete(id)
			return false, err
		}
		t := time.NewTimer(opTimeout)
		defer t.Stop()
		select {
		case seen := <-ch:
			steps.add(&step{id: id, command: res.Commands[0].ID, decision: res.Seq, sent: sent, seen: seen})
			return false, nil
		case <-t.C:
			waiters.Delete(id)
			return false, fmt.Errorf("%s: charged not recorded within %s", id, opTimeout)
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	p := e.planFor(1)
	res := interleave(ctx, p, progress, func(ctx context.Context, i int) Result {
		return RunOps(ctx, p.spec(i, e.opts.Workers, e.opts.Rate, classifyEsjet, nil), op)
	})
	ph := Phase{Name: PhaseE2E, Description: describe[PhaseE2E], Unit: "round trip"}
	ph.pair(&res[0], nil)
	// After the measured time: where the steps' time went.
	if ph.Hops, err = e.hops(ctx, steps.steps); err != nil && ph.Error == "" {
		ph.Error = "where a step's time goes: " + err.Error()
	}
	return []Phase{ph}, nil
}

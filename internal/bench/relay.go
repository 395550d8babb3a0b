package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/esjet/esjet/internal/bench/raw"
	"github.com/esjet/esjet/internal/node"
	"github.com/esjet/esjet/internal/outbox"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// The relay phase: each round fills a fresh namespace with decisions of
// one event and one command each, then times esjet's relay draining them
// into OUTBOX and raw.Relay doing the same with the relay's pipeline but
// no decoding.

func (e *env) relayPhase(ctx context.Context, progress func(float64)) ([]Phase, error) {
	n := e.drainSize()
	var batches, batched atomic.Uint64
	phases := e.drainPhase(ctx, progress, PhaseRelay, "decision", func(i int, pair drain) error {
		rns := e.ns + "_r" + strconv.Itoa(i)
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			deleteNamespace(cctx, e.nodeJS, rns, e.cfg)
		}()
		log, err := e.provision(ctx, rns)
		if err != nil {
			return err
		}
		last, err := fillDecisions(ctx, log, n)
		if err != nil {
			return err
		}
		names := streams.NamesFor(rns)
		esjet := func() (time.Duration, error) {
			start := time.Now()
			r, err := outbox.NewRelay(ctx, e.nodeJS, rns, node.RelayConfig(e.cfg), nil)
			if err != nil {
				return 0, err
			}
			defer func() {
				if st := r.Stats(); st.AtomicBatches > 0 {
					batches.Add(uint64(st.AtomicBatches))
					batched.Add(uint64(st.Commands))
				}
			}()
			return runUntil(ctx, start, "relay", r.Run,
				func() int64 { return r.Stats().Decisions }, func() bool { return r.Stats().LastSeq >= last })
		}
		rawRelay := raw.Timed(func() error {
			return raw.Relay(ctx, e.nodeJS, names.Events, wire.CommandSubject(rns, "raw"), last, e.cfg.Outbox.RelayBatch)
		})
		return pair(n, esjet, rawRelay)
	})
	phases[0].Batches, phases[0].Batched = batches.Load(), batched.Load()
	return phases, nil
}

// fillDecisions appends n decisions of one event and one reported command
// each, to n new aggregates, with 16 writers; it returns the last sequence.
func fillDecisions(ctx context.Context, log *streams.Log, n int) (uint64, error) {
	var last atomic.Uint64
	res := RunOps(ctx, Spec{Workers: 16, Ops: n}, sweep(func(ctx context.Context, i int) error {
		d := streams.Decision{ID: uuid.NewString(), AggregateType: "acct", AggregateID: "r" + strconv.Itoa(i),
			Events:   []streams.Event{{Type: "paid", Data: json.RawMessage(depositBody)}},
			Commands: []streams.Command{{Kind: "charge", Payload: json.RawMessage(depositBody), Report: true}}}
		rec, err := log.Append(ctx, d, streams.Position{})
		if err != nil {
			return err
		}
		for {
			old := last.Load()
			if rec.Seq <= old || last.CompareAndSwap(old, rec.Seq) {
				return nil
			}
		}
	}))
	if res.Errors > 0 {
		return 0, fmt.Errorf("fill: %w", res.FirstErr)
	}
	return last.Load(), nil
}

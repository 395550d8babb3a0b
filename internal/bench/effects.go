package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/bench/raw"
	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// The effects phase: each round puts commands of a fresh kind in OUTBOX,
// then times esjet's workers with a no-op handler draining them and
// raw.FetchAck (pull + fire-and-forget ack) draining the same messages
// through a consumer of its own.

func (e *env) effectsPhase(ctx context.Context, progress func(float64)) ([]Phase, error) {
	n := e.drainSize()
	var sq Result // the SQLite dispatcher draining n outbox rows a round
	rcBefore := e.node.Receipts().Stats()
	phases := e.drainPhase(ctx, progress, PhaseEffects, "command", func(i int, pair drain) error {
		kind := "noop" + strconv.Itoa(i)
		if err := publishCommands(ctx, e.nodeJS, e.ns, kind, n); err != nil {
			return err
		}
		esjet := func() (time.Duration, error) {
			start := time.Now()
			w, err := consumer.NewWorker(ctx, e.nodeJS, e.ns, consumer.KindConfig{Kind: kind, Workers: e.opts.Workers,
				Handler: consumer.HandlerFunc(noop), Node: "bench", Receipts: e.node.Receipts()}, nil, nil)
			if err != nil {
				return 0, err
			}
			return runUntil(ctx, start, "workers", w.Run,
				func() int64 { return w.Stats().Done }, func() bool { return w.Stats().Done >= int64(n) })
		}
		fetchAck := raw.Timed(func() error {
			return raw.FetchAck(ctx, e.nodeJS, streams.NamesFor(e.ns).Outbox, "raw-"+kind, wire.CommandSubject(e.ns, kind), n)
		})
		if err := pair(n, esjet, fetchAck); err != nil {
			return err
		}
		if e.sqlite == nil {
			return nil
		}
		if err := e.sqlite.fill(ctx, n); err != nil {
			return fmt.Errorf("sqlite fill: %w", err)
		}
		took, err := e.sqlite.dispatch(ctx, n)
		if err != nil {
			return fmt.Errorf("sqlite dispatcher: %w", err)
		}
		sq.Ops += int64(n)
		sq.Elapsed += took
		return nil
	})
	rc := e.node.Receipts().Stats()
	phases[0].Batches, phases[0].Batched = rc.Batches-rcBefore.Batches, rc.Batched-rcBefore.Batched
	phases[0].ReadRounds, phases[0].ReadsTogether = rc.ReadRounds-rcBefore.ReadRounds, rc.ReadsTogether-rcBefore.ReadsTogether
	if e.sqlite != nil && sq.Ops > 0 {
		phases[0].withSQLite(&sq)
	}
	return phases, nil
}

// publishCommands puts n commands of kind in OUTBOX as the relay would,
// encoded by wire.EncodeCommand.
func publishCommands(ctx context.Context, js jetstream.JetStream, ns, kind string, n int) error {
	now := time.Now()
	return raw.PublishAll(ctx, js, n, func(i int) *nats.Msg {
		id := "x" + strconv.Itoa(i) + "-" + kind
		rec := streams.Record{Seq: uint64(i + 1), Decision: streams.Decision{ID: "d-" + id, AggregateType: "acct", AggregateID: id,
			Events: []streams.Event{{Type: "paid", Version: 1}}}}
		return wire.EncodeCommand(ns, rec, streams.Command{ID: wire.CommandID("acct", id, 1, 0), Kind: kind, Payload: depositBody}, now)
	})
}

package ops

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Repair re-publishes every orphan of report to OUTBOX, built from its
// decision in the log exactly as the relay builds it (same headers,
// Nats-Msg-Id = the original command id; a command still due later becomes
// its schedule again). It returns how many OUTBOX stored. An orphan OUTBOX
// already holds again (repaired before, or relayed meanwhile) is not
// counted; duplicates are never touched. If OUTBOX refused some as
// duplicates of deleted messages, the error wraps [ErrRepairDeduplicated].
func (r *Reconciler) Repair(ctx context.Context, report Report) (int, error) {
	if len(report.Orphans) == 0 {
		return 0, nil
	}
	events, err := r.js.Stream(ctx, r.names.Events)
	if err != nil {
		return 0, fmt.Errorf("repair: event log %s: %w", r.names.Events, err)
	}
	outbox, err := r.js.Stream(ctx, r.names.Outbox)
	if err != nil {
		return 0, fmt.Errorf("repair: outbox %s: %w", r.names.Outbox, err)
	}
	const window = 1024
	pub, err := jetstream.New(r.js.Conn(), jetstream.WithPublishAsyncMaxPending(window), jetstream.WithPublishAsyncTimeout(30*time.Second))
	if err != nil {
		return 0, err
	}
	bySeq := map[uint64][]string{}
	for _, o := range report.Orphans {
		bySeq[o.DecisionSeq] = append(bySeq[o.DecisionSeq], o.ID)
	}
	type sent struct {
		id  string
		fut jetstream.PubAckFuture
	}
	var (
		pending []sent
		stored  int
		blocked []string
		errs    []error
	)
	wait := func() error {
		for _, s := range pending {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case err := <-s.fut.Err():
				errs = append(errs, fmt.Errorf("publish %s: %w", s.id, err))
			case ack := <-s.fut.Ok():
				if !ack.Duplicate {
					stored++
					r.logger.Debug("repaired orphan", "command_id", s.id, "stream", r.names.Outbox, "seq", ack.Sequence)
					continue
				}
				// The id is in OUTBOX's duplicate window. Fine if the copy it
				// points at exists; if it was deleted, the orphan stays.
				m, err := outbox.GetMsg(ctx, ack.Sequence)
				if err == nil && m.Header.Get(wire.HeaderCommandID) == s.id {
					continue
				}
				blocked = append(blocked, s.id)
			}
		}
		pending = pending[:0]
		return nil
	}
	now := r.cfg.Now()
	for _, seq := range slices.Sorted(maps.Keys(bySeq)) {
		raw, err := events.GetMsg(ctx, seq)
		if err != nil {
			errs = append(errs, fmt.Errorf("read decision at seq %d: %w", seq, err))
			continue
		}
		rec, err := streams.DecodeRecord(raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, id := range bySeq[seq] {
			i := slices.IndexFunc(rec.Commands, func(c streams.Command) bool { return c.ID == id })
			if i < 0 {
				errs = append(errs, fmt.Errorf("decision at seq %d has no command %s: the report is stale or not from this namespace; run reconcile again before --repair", seq, id))
				continue
			}
			fut, err := pub.PublishMsgAsync(wire.EncodeCommand(r.names.Namespace, rec, rec.Commands[i], now))
			if err != nil {
				errs = append(errs, fmt.Errorf("publish %s: %w", id, err))
				continue
			}
			pending = append(pending, sent{id: id, fut: fut})
			if len(pending) >= window/2 {
				if err := wait(); err != nil {
					return stored, err
				}
			}
		}
	}
	if err := wait(); err != nil {
		return stored, err
	}
	if len(blocked) > 0 {
		win := outbox.CachedInfo().Config.Duplicates
		errs = append(errs, fmt.Errorf("%w: %d orphan(s) (first %s) were stored and deleted less than the duplicate window (%s) ago; run the repair again once it has passed",
			ErrRepairDeduplicated, len(blocked), blocked[0], win))
	}
	if stored > 0 {
		r.logger.Info("repaired orphans: re-published to OUTBOX with their original ids", "stream", r.names.Outbox, "count", stored)
	}
	if err := errors.Join(errs...); err != nil {
		return stored, fmt.Errorf("repair: %w", err)
	}
	return stored, nil
}

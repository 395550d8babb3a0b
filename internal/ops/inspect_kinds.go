package ops

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// KindStats is what the commands of one kind are doing.
type KindStats struct {
	Kind string `json:"kind"`
	// Messages on <ns>.outbox.<kind> (OUTBOX keeps them after processing).
	Messages uint64 `json:"messages"`
	// Scheduled: delayed commands whose schedule has not fired.
	Scheduled uint64 `json:"scheduled"`
	// Consumer is the kind's worker consumer (esjet-worker-<kind>), ""
	// when there is none yet.
	Consumer string `json:"consumer,omitempty"`
	// Pending: not yet delivered to a worker — the consumer's pending
	// count, or every message when there is no consumer yet.
	Pending uint64 `json:"pending"`
	// InFlight: delivered to a worker, not acked yet.
	InFlight uint64 `json:"in_flight"`
	Done     uint64 `json:"done"`   // receipts with outcome done
	Failed   uint64 `json:"failed"` // receipts with another outcome
	Dead     uint64 `json:"dead"`   // dead letters in the DLQ no audit record settled
	// OutcomesRefused: receipts whose outcome the aggregate refused (the
	// command stays awaited there; `esjet reconcile` lists them).
	OutcomesRefused uint64 `json:"outcomes_refused"`
	// Waiting: pull requests the kind's workers have outstanding right now
	// (the consumer's num_waiting). An idle worker pool always has one per
	// node: each waits for the next command.
	Waiting int `json:"waiting"`
	// LastActive: when a worker last took or acknowledged a command of the
	// kind (the consumer's last delivery or ack); zero if never.
	LastActive time.Time `json:"last_active,omitzero"`
	// Pulling says whether any worker serves the kind now: a pull request
	// waiting, or a delivery or ack within [ActiveWindow] (every worker
	// busy).
	Pulling bool `json:"pulling"`
	// Stalled: commands pending and no worker pulling. They wait, without
	// error, until a node serves the kind.
	Stalled bool `json:"stalled"`
}

// ActiveWindow is how recent a worker's last delivery or ack must be for a
// kind with no pull request waiting to count as served: its workers are all
// busy rather than gone. An idle worker renews its pull every 2s.
const ActiveWindow = time.Minute

// Kinds reports per kind, sorted by kind: every kind that has messages in
// OUTBOX, a pending schedule, a receipt or a dead letter.
func (in *Inspector) Kinds(ctx context.Context) ([]KindStats, error) {
	stats := map[string]*KindStats{}
	get := func(kind string) *KindStats {
		if stats[kind] == nil {
			stats[kind] = &KindStats{Kind: kind}
		}
		return stats[kind]
	}
	outbox, err := in.js.Stream(ctx, in.names.Outbox)
	if err != nil {
		return nil, fmt.Errorf("outbox kinds: %s: %w", in.names.Outbox, err)
	}
	counts, err := subjectCounts(ctx, outbox, in.names.OutboxFilter())
	if err != nil {
		return nil, err
	}
	for subj, n := range counts {
		get(wire.KindOfCommandSubject(in.names.Namespace, subj)).Messages += n // every priority band
	}
	counts, err = subjectCounts(ctx, outbox, in.names.ScheduleFilter())
	if err != nil {
		return nil, err
	}
	for subj, n := range counts {
		get(wire.KindOfSchedule(in.names.Namespace, subj)).Scheduled += n
	}
	if dlq, err := optionalStream(ctx, in.js, in.names.DLQ); err != nil {
		return nil, err
	} else if dlq != nil {
		// The open letters only (never the audit trail or the settled
		// copies): a read of each, which also skips the marks of letters
		// settled in the last second.
		open, err := OpenDLQ(in.js, in.names.Namespace).List(ctx, Filter{})
		if err != nil {
			return nil, err
		}
		for _, dl := range open {
			get(dl.Kind).Dead++
		}
	}
	if err := scanReceipts(ctx, in.js, in.names, in.batch, func(re receiptEntry) {
		rc := re.Receipt
		if re.Deleted || re.Err != nil || rc.Kind == "" {
			return
		}
		if rc.Outcome == wire.OutcomeDone {
			get(rc.Kind).Done++
		} else {
			get(rc.Kind).Failed++
		}
		if rc.OutcomeRefused != "" {
			get(rc.Kind).OutcomesRefused++
		}
	}); err != nil {
		return nil, err
	}
	now := in.now()
	out := make([]KindStats, 0, len(stats))
	for _, kind := range slices.Sorted(maps.Keys(stats)) {
		ks := stats[kind]
		ks.Pending = ks.Messages
		cons, err := in.js.Consumer(ctx, in.names.Outbox, wire.WorkerConsumerName(kind))
		switch {
		case errors.Is(err, jetstream.ErrConsumerNotFound):
		case err != nil:
			return nil, fmt.Errorf("outbox kinds: consumer %s: %w", wire.WorkerConsumerName(kind), err)
		default:
			ci := cons.CachedInfo()
			ks.Consumer = ci.Name
			ks.Pending, ks.InFlight = ci.NumPending, uint64(ci.NumAckPending)
			ks.Waiting = ci.NumWaiting
			ks.LastActive = lastActive(ci)
		}
		ks.Pulling = ks.Waiting > 0 || (!ks.LastActive.IsZero() && now.Sub(ks.LastActive) < ActiveWindow)
		ks.Stalled = ks.Pending > 0 && !ks.Pulling
		out = append(out, *ks)
	}
	return out, nil
}

// subjectCounts returns the stream's message count per subject on filter.
func subjectCounts(ctx context.Context, st jetstream.Stream, filter string) (map[string]uint64, error) {
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("subjects of %s on %s: %w", st.CachedInfo().Config.Name, filter, err)
	}
	return info.State.Subjects, nil
}

// lastActive is the later of a consumer's last delivery and last ack.
func lastActive(ci *jetstream.ConsumerInfo) time.Time {
	var t time.Time
	for _, p := range []*time.Time{ci.Delivered.Last, ci.AckFloor.Last} {
		if p != nil && p.After(t) {
			t = p.UTC()
		}
	}
	return t
}

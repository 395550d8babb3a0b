package archive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Settled, for an archive, means nothing will ever need the aggregate's
// archived decisions again but a history read:
//
//   - the relay has passed them: its consumer's ack floor is at or past
//     the aggregate's last decision (else a command would never reach
//     OUTBOX);
//   - every command they issued has its receipt (done or failed; a dead
//     letter gets a failed one), and an outcome the aggregate asked for
//     was not refused by it; a command older than streams.receipts_max_age
//     whose receipt expired counts as settled;
//   - no command of theirs is an open dead letter (a retry from the DLQ
//     would run it again and report to the aggregate);
//   - the aggregate awaits no reported outcome (the repository's
//     outstanding commands, checked with the state).
//
// reconcile then finds those commands' OUTBOX copies and receipts without
// their decisions, and counts them as it counts expired ones (no drift).

// environment is what a pass reads once: the relay's position, the open
// dead letters and the receipts bucket.
type environment struct {
	relayFloor uint64
	openDead   map[string]bool // command ids with an open dead letter
	receipts   jetstream.KeyValue
}

func (a *Archiver) environment(ctx context.Context) (*environment, error) {
	names := a.log.Names()
	env := &environment{openDead: map[string]bool{}}
	cons, err := a.js.Consumer(ctx, names.Events, wire.RelayConsumerName)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		// No relay ever ran: no decision with a command is relayed.
	case err != nil:
		return nil, fmt.Errorf("relay position: %w", err)
	default:
		env.relayFloor = cons.CachedInfo().AckFloor.Stream
	}
	env.receipts, err = a.js.KeyValue(ctx, names.Receipts)
	if err != nil {
		return nil, fmt.Errorf("receipts bucket %s: %w", names.Receipts, err)
	}
	sc := streams.NewScanner(a.js, names.DLQ, 1000)
	defer sc.Close()
	_, err = sc.Scan(ctx, streams.ScanRange{Filter: wire.DeadLetterFilter(names.Namespace)}, func(m *jetstream.RawStreamMsg) error {
		if !wire.IsSettleMark(m.Header) {
			if dl := wire.DecodeDeadLetter(m); dl.ID != "" {
				env.openDead[dl.ID] = true
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("open dead letters: %w", err)
	}
	return env, nil
}

// settled checks recs' commands (see above) and counts them per kind.
func (a *Archiver) settled(ctx context.Context, env *environment, recs []streams.Record, now time.Time) (map[string]int, bool, error) {
	counts := map[string]int{}
	for _, r := range recs {
		if len(r.Commands) == 0 {
			continue
		}
		if r.Seq > env.relayFloor {
			return nil, false, nil
		}
		for _, c := range r.Commands {
			counts[c.Kind]++
			if env.openDead[c.ID] {
				return nil, false, nil
			}
			e, err := env.receipts.Get(ctx, wire.ReceiptKey(c.ID))
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				if a.cfg.ReceiptsMaxAge > 0 && now.Sub(r.Stored) > a.cfg.ReceiptsMaxAge {
					continue
				}
				return nil, false, nil
			}
			if err != nil {
				return nil, false, fmt.Errorf("receipt of %s: %w", c.ID, err)
			}
			rc, err := wire.DecodeReceipt(e.Value())
			if err != nil || rc.Outcome == "" || (c.Report && rc.OutcomeRefused != "") {
				return nil, false, nil
			}
		}
	}
	if len(counts) == 0 {
		counts = nil
	}
	return counts, true, nil
}

package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The relay's pull loop: one pull session at a time, standing down when it
// stops before a decision a newer build wrote.

// Run relays until ctx ends, then finishes the batch in hand (publish, wait,
// ack) and returns. It returns an error only if it cannot start consuming.
//
// A relay stopped before a decision a newer build wrote (toonew.go) stands
// down: it stops pulling and gives up the pin, so a standby relay — a
// newer node's, in a rolling upgrade — takes the namespace over; it pulls
// again, as a standby, after standDown. What it held from that decision on
// stays unacknowledged and comes back after AckWait to the relay active
// then (in whatever order the server redelivers it: a decision after the
// newer one may be relayed before it, as after any failover, but the newer
// one is never acknowledged unrelayed).
func (r *Relay) Run(ctx context.Context) error {
	r.logger.Info("relay started", "stream", r.names.Events)
	defer func() {
		r.closeScanner()
		r.logger.Info("relay stopped", "last_seq", r.lastSeq.Load())
	}()
	for {
		stood, err := r.consume(ctx)
		if err != nil || !stood {
			return err
		}
		wait := r.standDown()
		if err := r.js.Conn().Flush(); err == nil {
			uctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if st, err := r.js.Stream(uctx, r.names.Events); err == nil {
				_ = st.UnpinConsumer(uctx, ConsumerName, PriorityGroup)
			}
			cancel()
		}
		r.logger.Warn("relay: standing down before a decision a newer build wrote, so a newer node's relay can take over", "for", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// standDown is how long a relay stopped at a newer decision stays away:
// long enough for a standby's pull to take the pin (every PinnedTTL/2) and
// for what it held to come back (AckWait), so that, if it gets the pin
// again, the decision it stopped at comes first (the server redelivers
// before it delivers anything new); short enough to come back soon if no
// relay reads it.
func (r *Relay) standDown() time.Duration {
	return max(min(max(r.cfg.PinnedTTL, 2*time.Second), 30*time.Second), r.cfg.AckWait+time.Second)
}

// consume runs one pull session: until ctx ends (false), or until the relay
// stopped before a decision a newer build wrote (true).
func (r *Relay) consume(ctx context.Context) (stood bool, _ error) {
	in := make(chan jetstream.Msg, r.cfg.Batch*4)
	cc, err := r.cons.Consume(func(m jetstream.Msg) { in <- m },
		jetstream.PullPriorityGroup(PriorityGroup),
		jetstream.PullMaxMessages(r.cfg.Batch*2),
		jetstream.PullExpiry(max(time.Second, min(r.cfg.PinnedTTL/2, 30*time.Second))),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if errors.Is(err, jetstream.ErrPinIDMismatch) {
				return // a standby relay's pulls while another is pinned
			}
			// The server may have been restarted under us, forgetting
			// deliveries it made: what comes next may have been relayed.
			r.lostServer()
			if !errors.Is(err, jetstream.ErrNoHeartbeat) {
				r.logger.Debug("consume", "error", err)
			}
		}))
	if err != nil {
		return false, fmt.Errorf("relay: consume %s: %w", r.names.Events, err)
	}
	r.lostServer()
	conf := r.startConfirmer(ctx)
	defer func() {
		cc.Stop()
		<-cc.Closed()
		conf.stop()
		// Hand back what was prefetched but not relayed, so the next relay
		// gets it now rather than after AckWait. Not when standing down:
		// the decision it stopped at was not handed back (relay), and what
		// follows it comes back with it.
		for !stood {
			select {
			case m := <-in:
				_ = m.Nak()
				continue
			default:
			}
			break
		}
	}()
	batch := make([]jetstream.Msg, 0, r.cfg.Batch)
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case m := <-in:
			batch = append(batch[:0], m)
		}
		// Take what else is already here, up to a batch: under load the
		// batches fill, when idle a single decision goes at once.
	fill:
		for len(batch) < r.cfg.Batch {
			select {
			case m := <-in:
				batch = append(batch, m)
			default:
				break fill
			}
		}
		r.cfg.Telemetry.RelayBatch(len(batch))
		if r.relay(ctx, conf, batch) {
			return true, nil
		}
	}
}

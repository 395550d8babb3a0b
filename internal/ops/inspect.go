package ops

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/esjet/esjet/internal/archive"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Inspector answers an operator's questions about one namespace's outbox:
// how far behind the relay is, what each kind of command is doing, and
// where one command is. It only reads. It is safe for concurrent use.
type Inspector struct {
	js    jetstream.JetStream
	names streams.Names
	batch int
	now   func() time.Time
	// outboxRead counts the OUTBOX messages command lookups read (tests).
	outboxRead atomic.Int64
	// archive is where archived decisions are read (nil: the log only).
	archive archive.Store
}

// Inspect returns the Inspector of namespace ns. It does no I/O.
func Inspect(js jetstream.JetStream, ns string) *Inspector {
	return &Inspector{js: js, names: streams.NamesFor(ns), batch: 1000, now: time.Now}
}

// WithArchive makes command lookups read an archived aggregate's
// decisions from store (docs/archiving.md), where its tombstone says they
// are, instead of finding only the tombstone. It returns in.
func (in *Inspector) WithArchive(store archive.Store) *Inspector {
	in.archive = store
	return in
}

// OutboxReads is how many OUTBOX messages the command lookups of this
// Inspector have read so far (probes and scans): what `esjet bench
// --phases scale` shows beside a lookup's time.
func (in *Inspector) OutboxReads() int64 { return in.outboxRead.Load() }

// Lag is how far the relay is behind the log.
type Lag struct {
	// RelayConsumer says whether the relay's consumer exists; without it
	// no decision was ever relayed.
	RelayConsumer bool `json:"relay_consumer"`
	// Unrelayed: decisions after the relay's ack floor, the line reconcile
	// also draws (not delivered to the relay, delivered and not acked, or
	// acked past a gap). Derived from the stream's last sequence rather
	// than the consumer's NumPending, which catches up with new messages
	// asynchronously and read low right after an append.
	Unrelayed  uint64 `json:"unrelayed"`
	Pending    uint64 `json:"pending"`     // not yet delivered to the relay
	AckPending uint64 `json:"ack_pending"` // delivered, not acked
	// AckFloor: every decision up to this EVENTS sequence is relayed.
	AckFloor      uint64 `json:"ack_floor"`
	EventsLastSeq uint64 `json:"events_last_seq"`
	// The oldest unrelayed decision; zero when the relay is caught up.
	OldestSeq uint64        `json:"oldest_seq,omitempty"`
	OldestAt  time.Time     `json:"oldest_at,omitzero"`
	OldestAge time.Duration `json:"oldest_age_ns"`
}

// Lag reports the relay's lag: its consumer's pending and ack-pending
// counts, and the age of the decision right after its ack floor.
func (in *Inspector) Lag(ctx context.Context) (Lag, error) {
	events, err := in.js.Stream(ctx, in.names.Events)
	if err != nil {
		return Lag{}, fmt.Errorf("relay lag: event log %s: %w", in.names.Events, err)
	}
	st := events.CachedInfo().State
	lag := Lag{EventsLastSeq: st.LastSeq}
	cons, err := in.js.Consumer(ctx, in.names.Events, wire.RelayConsumerName)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		lag.Unrelayed, lag.Pending = st.Msgs, st.Msgs
	case err != nil:
		return lag, fmt.Errorf("relay lag: consumer %s: %w", wire.RelayConsumerName, err)
	default:
		ci := cons.CachedInfo()
		lag.RelayConsumer = true
		lag.Pending, lag.AckPending = ci.NumPending, uint64(ci.NumAckPending)
		lag.AckFloor = ci.AckFloor.Stream
		if st.LastSeq > lag.AckFloor {
			lag.Unrelayed = st.LastSeq - max(lag.AckFloor, st.FirstSeq-1)
		}
	}
	if lag.Unrelayed == 0 || lag.AckFloor >= st.LastSeq {
		return lag, nil
	}
	from := max(lag.AckFloor+1, st.FirstSeq)
	sc := streams.NewScanner(in.js, in.names.Events, 1)
	defer sc.Close()
	_, err = sc.Scan(ctx, streams.ScanRange{From: from}, func(m *jetstream.RawStreamMsg) error {
		lag.OldestSeq, lag.OldestAt = m.Sequence, m.Time.UTC()
		return streams.ErrStopScan
	})
	if err != nil {
		return lag, fmt.Errorf("relay lag: %w", err)
	}
	if !lag.OldestAt.IsZero() {
		lag.OldestAge = max(in.now().Sub(lag.OldestAt), 0)
	}
	return lag, nil
}

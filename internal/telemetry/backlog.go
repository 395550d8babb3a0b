package telemetry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Backlog is what waits in the namespace's streams, read from JetStream
// when Prometheus scrapes (the same for every node of the namespace).
type Backlog struct {
	// RelayPending is the decisions in EVENTS after the relay's ack floor:
	// recorded, their commands not yet (known to be) in OUTBOX.
	RelayPending uint64
	// RelayLag is how long the oldest of them has waited (0 when none).
	RelayLag time.Duration
	// Kinds are per command kind.
	Kinds map[string]*KindBacklog
}

// KindBacklog is one command kind's commands in OUTBOX and the DLQ.
type KindBacklog struct {
	Pending  int64 // not yet delivered to a worker (a kind with no worker consumer: all its commands)
	InFlight int64 // delivered, not yet acknowledged (being handled, or waiting out a retry's backoff)
	Waiting  int64 // pull requests waiting: idle workers, on any node
	Dead     int64 // dead letters not settled (retried or discarded) yet: the DLQ depth
}

func (b *Backlog) kind(k string) *KindBacklog {
	if b.Kinds[k] == nil {
		b.Kinds[k] = &KindBacklog{}
	}
	return b.Kinds[k]
}

// ReadBacklog asks JetStream for namespace ns's backlog: the EVENTS stream
// and the relay's consumer, OUTBOX's worker consumers and subjects, the
// DLQ's subjects. What it could not read is left zero and joined in err.
func ReadBacklog(ctx context.Context, js jetstream.JetStream, ns string) (Backlog, error) {
	names := streams.NamesFor(ns)
	b := Backlog{Kinds: map[string]*KindBacklog{}}
	errs := []error{b.readRelay(ctx, js, names), b.readOutbox(ctx, js, names), b.readDLQ(ctx, js, names)}
	return b, errors.Join(errs...)
}

func (b *Backlog) readRelay(ctx context.Context, js jetstream.JetStream, names streams.Names) error {
	events, err := js.Stream(ctx, names.Events)
	if err != nil {
		return fmt.Errorf("stream %s: %w", names.Events, err)
	}
	cons, err := events.Consumer(ctx, wire.RelayConsumerName)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil // no relay yet
	}
	if err != nil {
		return fmt.Errorf("relay consumer: %w", err)
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		return fmt.Errorf("relay consumer: %w", err)
	}
	last := events.CachedInfo().State.LastSeq
	floor := ci.AckFloor.Stream
	if last <= floor {
		return nil
	}
	b.RelayPending = last - floor
	first := max(floor+1, events.CachedInfo().State.FirstSeq)
	m, err := events.GetMsg(ctx, first)
	if err != nil {
		return fmt.Errorf("oldest unrelayed decision (seq %d): %w", first, err)
	}
	b.RelayLag = max(time.Since(m.Time), 0)
	return nil
}

func (b *Backlog) readOutbox(ctx context.Context, js jetstream.JetStream, names streams.Names) error {
	outbox, err := js.Stream(ctx, names.Outbox)
	if err != nil {
		return fmt.Errorf("stream %s: %w", names.Outbox, err)
	}
	consumed := map[string]bool{}
	lister := outbox.ListConsumers(ctx)
	for ci := range lister.Info() {
		kind, _, ok := wire.KindOfBandConsumer(ci.Name) // every priority band's, summed
		if !ok {
			continue
		}
		consumed[kind] = true
		k := b.kind(kind)
		k.Pending += int64(ci.NumPending)
		k.InFlight += int64(ci.NumAckPending)
		k.Waiting += int64(ci.NumWaiting)
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("OUTBOX consumers: %w", err)
	}
	// A kind no worker ever consumed has no consumer: all of it waits.
	info, err := outbox.Info(ctx, jetstream.WithSubjectFilter(names.OutboxFilter()))
	if err != nil {
		return fmt.Errorf("OUTBOX subjects: %w", err)
	}
	for subj, n := range info.State.Subjects {
		if kind := wire.KindOfCommandSubject(names.Namespace, subj); kind != "" && !consumed[kind] {
			b.kind(kind).Pending += int64(n)
		}
	}
	return nil
}

func (b *Backlog) readDLQ(ctx context.Context, js jetstream.JetStream, names streams.Names) error {
	dlq, err := js.Stream(ctx, names.DLQ)
	if err != nil {
		return fmt.Errorf("stream %s: %w", names.DLQ, err)
	}
	// One subject per open letter; a settled one is replaced by a mark
	// that leaves within a second or two (wire.SettleMark), counted until
	// then.
	info, err := dlq.Info(ctx, jetstream.WithSubjectFilter(wire.DeadLetterFilter(names.Namespace)))
	if err != nil {
		return fmt.Errorf("DLQ subjects: %w", err)
	}
	for subj, n := range info.State.Subjects {
		if kind, ok := wire.KindOfDeadLetter(names.Namespace, subj); ok {
			b.kind(kind).Dead += int64(n)
		}
	}
	return nil
}

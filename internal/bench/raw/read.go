package raw

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// FetchAck drains n messages on filter from stream with a plain durable
// pull consumer named durable: fetch up to 256 at a time, ack each, fire
// and forget. That is the floor JetStream offers; esjet's workers also read
// and write a receipt per command and wait for each ack's confirmation.
func FetchAck(ctx context.Context, js jetstream.JetStream, stream, durable, filter string, n int) error {
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: durable, FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 10_000,
	})
	if err != nil {
		return err
	}
	got := 0
	for since := time.Now(); got < n; {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch, err := cons.Fetch(min(256, n-got), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return err
		}
		before := got
		for m := range batch.Messages() {
			if err := m.Ack(); err != nil {
				return err
			}
			got++
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return err
		}
		if got > before {
			since = time.Now()
		} else if time.Since(since) > idle {
			return fmt.Errorf("fetched %d of %d messages on %s, then none for %s", got, n, filter, idle)
		}
	}
	return nil
}

// Read reads stream up to sequence last with an ordered consumer on
// filter, touching only the bytes (esjet's reader decodes every decision),
// and returns how many messages came.
func Read(ctx context.Context, js jetstream.JetStream, stream, filter string, last uint64) (int, error) {
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return 0, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1000))
	if err != nil {
		return 0, err
	}
	defer it.Stop()
	n, size := 0, 0
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return n, err
		}
		n++
		size += len(m.Data())
		meta, err := m.Metadata()
		if err != nil {
			return n, err
		}
		if meta.Sequence.Stream >= last {
			if size == 0 {
				return n, errors.New("read only empty messages")
			}
			return n, nil
		}
	}
}

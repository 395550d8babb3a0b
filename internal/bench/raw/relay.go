package raw

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// idle is how long the raw loops wait for a message or an ack before they
// give up: a stuck round fails instead of hanging the run.
const idle = 30 * time.Second

// Relay drains stream (the event log) into subject (on the OUTBOX stream)
// the minimal way, with the relay's own pipeline: a durable consumer read
// with Consume and prefetch, batches of what has arrived (up to batch),
// async publishes with a fresh Nats-Msg-Id, and once the batch's publishes
// are confirmed an ack per message, the batch's last one confirmed
// (DoubleAck). It decodes no decision and builds no command message: the
// difference to the relay is esjet's cost. It returns when the message at
// stream sequence last is acked. batch <= 0 means 256.
func Relay(ctx context.Context, js jetstream.JetStream, stream, subject string, last uint64, batch int) error {
	if batch <= 0 {
		batch = 256
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: "raw-relay", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: batch * 8,
	})
	if err != nil {
		return err
	}
	pub, err := jetstream.New(js.Conn(), jetstream.WithPublishAsyncMaxPending(batch*16))
	if err != nil {
		return err
	}
	in := make(chan jetstream.Msg, batch*4)
	cc, err := cons.Consume(func(m jetstream.Msg) { in <- m }, jetstream.PullMaxMessages(batch*2))
	if err != nil {
		return err
	}
	defer cc.Stop()
	msgs := make([]jetstream.Msg, 0, batch)
	timeout := time.NewTimer(idle)
	defer timeout.Stop()
	for {
		select {
		case m := <-in:
			msgs = append(msgs[:0], m)
		case <-timeout.C:
			return fmt.Errorf("no message for %s before sequence %d", idle, last)
		case <-ctx.Done():
			return ctx.Err()
		}
		timeout.Reset(idle)
	fill:
		for len(msgs) < batch {
			select {
			case m := <-in:
				msgs = append(msgs, m)
			default:
				break fill
			}
		}
		futs := make([]jetstream.PubAckFuture, 0, len(msgs))
		for _, m := range msgs {
			out := nats.NewMsg(subject)
			out.Data = m.Data()
			out.Header.Set(jetstream.MsgIDHeader, uuid.NewString())
			f, err := pub.PublishMsgAsync(out, jetstream.WithStallWait(idle))
			if err != nil {
				return err
			}
			futs = append(futs, f)
		}
		for _, f := range futs {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		for _, m := range msgs[:len(msgs)-1] {
			_ = m.Ack()
		}
		lastMsg := msgs[len(msgs)-1]
		if err := lastMsg.DoubleAck(ctx); err != nil {
			return err
		}
		meta, err := lastMsg.Metadata()
		if err != nil {
			return err
		}
		if meta.Sequence.Stream >= last {
			return nil
		}
	}
}

// PublishAll publishes the n messages msg(0) … msg(n-1) asynchronously and
// waits for every ack: how the benchmarks fill a stream without timing it.
// With sync always a full window of publishes waits on fsyncs longer than
// the default stall wait (200 ms), so each publish may wait up to 30s.
func PublishAll(ctx context.Context, js jetstream.JetStream, n int, msg func(i int) *nats.Msg) error {
	pub, err := jetstream.New(js.Conn(), jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return err
	}
	futs := make([]jetstream.PubAckFuture, 0, n)
	for i := range n {
		f, err := pub.PublishMsgAsync(msg(i), jetstream.WithStallWait(idle))
		if err != nil {
			return err
		}
		futs = append(futs, f)
	}
	select {
	case <-pub.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(idle):
		return fmt.Errorf("publishing %d messages: no acks for %s", n, idle)
	}
	for _, f := range futs {
		select {
		case err := <-f.Err():
			return fmt.Errorf("publish to %s: %w", f.Msg().Subject, err)
		default:
		}
	}
	return nil
}

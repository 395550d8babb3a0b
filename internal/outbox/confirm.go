package outbox

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Confirming the relay's acks. The relay acks a batch's decisions once
// their commands are in OUTBOX, the last one with a confirmation; waiting
// for that confirmation before the next batch cost a round trip per batch
// on the path from a decision to its command in OUTBOX. It changes nothing
// the relay does next — an ack that is lost only brings the decisions back,
// and their commands are found in OUTBOX (redelivery.go) — so the relay
// moves on at once and the confirmations are awaited here, in order (acks
// on one connection are processed in order), counting the decisions and
// the last sequence as each is confirmed.

// confirmsInFlight bounds the batches whose confirmation is awaited: past
// it the relay waits (the server is not answering acks).
const confirmsInFlight = 64

// confirmation is one acked batch: how many decisions, and its last one,
// acked with a confirmation.
type confirmation struct {
	n    int
	last jetstream.Msg
}

// confirmer awaits the confirmations of the relay's acks, in order.
type confirmer struct {
	r    *Relay
	in   chan confirmation
	done chan struct{}
}

func (r *Relay) startConfirmer(ctx context.Context) *confirmer {
	c := &confirmer{r: r, in: make(chan confirmation, confirmsInFlight), done: make(chan struct{})}
	go c.run(context.WithoutCancel(ctx))
	return c
}

// push hands over a batch whose last decision was just acked.
func (c *confirmer) push(n int, last jetstream.Msg) {
	c.in <- confirmation{n: n, last: last}
}

// stop waits for the confirmations in hand (each bounded by its timeout).
func (c *confirmer) stop() {
	close(c.in)
	<-c.done
}

func (c *confirmer) run(ctx context.Context) {
	defer close(c.done)
	for b := range c.in {
		c.r.confirm(ctx, b.n, b.last)
	}
}

// confirm acks last again with a confirmation and counts the n decisions
// of its batch when the server confirms it.
func (r *Relay) confirm(ctx context.Context, n int, last jetstream.Msg) {
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := last.DoubleAck(actx)
	cancel()
	if err != nil {
		// Not confirmed: the decisions may come back, and their commands are
		// found in OUTBOX. Nothing is lost.
		r.logger.Warn("relay: ack", "error", err)
		return
	}
	r.decisions.Add(int64(n))
	if meta, err := last.Metadata(); err == nil {
		r.lastSeq.Store(meta.Sequence.Stream)
	}
}

package outbox

import (
	"time"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/telemetry"
	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Relay consumer identity on <NS>_EVENTS.
const (
	ConsumerName  = wire.RelayConsumerName
	PriorityGroup = "relay"
)

// RelayConfig tunes a [Relay]. The zero value of every field means its
// default.
type RelayConfig struct {
	// Batch is the most decisions relayed together (one wait for OUTBOX
	// acks, one ack back). Zero means 256.
	Batch int
	// PinnedTTL is how long the active relay may go without pulling before
	// another node's relay takes over. Zero means 5s; at least 2s (pulls are
	// renewed every PinnedTTL/2, and JetStream wants at least 1s).
	PinnedTTL time.Duration
	// AckWait is how long a fetched decision may stay unacknowledged before
	// JetStream redelivers it: after a relay dies, what it held comes back
	// after this. Zero means 10s.
	AckWait time.Duration
	// Now is the clock deciding whether a delayed command is still due
	// later. Nil means time.Now.
	Now func() time.Time
	// Telemetry traces each command carried and records batch sizes. Nil
	// records nothing.
	Telemetry *telemetry.Telemetry
	// AtomicMin is the least number of commands a batch publishes as one
	// atomic batch on OUTBOX (one durable write for all of them: under
	// sync always on one server, every other publish is fsynced on its
	// own). Fewer go out as concurrent plain publishes, as do delayed
	// commands. Zero: every command is its own publish (R3, sync
	// interval: there a batch only adds its fixed cost).
	AtomicMin int
	// ReceiptsMaxAge is the receipts bucket's max age
	// (streams.receipts_max_age). A decision older than it (a relay
	// consumer made anew, a node down that long) may have had its commands
	// carried out and their receipts expired: nothing would fold them, so
	// they are not published again, but logged and counted
	// ([RelayStats].PastReceipts); reconcile reports them expired. Zero:
	// receipts are kept forever, every decision is relayed.
	ReceiptsMaxAge time.Duration
}

// setDefaults fills what is zero with config.Default()'s values (the
// relay's failover_after is its PinnedTTL): the defaults are stated once,
// there.
func (c *RelayConfig) setDefaults() {
	d := config.Default().Outbox
	if c.Batch == 0 {
		c.Batch = d.RelayBatch
	}
	if c.PinnedTTL == 0 {
		c.PinnedTTL = d.FailoverAfter.Std()
	}
	if c.AckWait == 0 {
		c.AckWait = d.AckWait.Std()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// RelayConsumerConfig is the durable consumer the relay pulls from.
func RelayConsumerConfig(names streams.Names, cfg RelayConfig) jetstream.ConsumerConfig {
	cfg.setDefaults()
	return jetstream.ConsumerConfig{
		Durable:       ConsumerName,
		Description:   "esjet relay: publishes the commands recorded in decisions to OUTBOX",
		FilterSubject: names.EventsFilter(),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		// Explicit, per decision: cumulative acks (AckAll) would let a new
		// relay's ack of a later decision also ack the ones a dead relay was
		// still holding, and their commands would never be relayed.
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        cfg.AckWait,
		MaxDeliver:     -1,
		MaxAckPending:  cfg.Batch * 8,
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PriorityGroups: []string{PriorityGroup},
		PinnedTTL:      cfg.PinnedTTL,
	}
}

package node

import (
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// groupCommitMin is 8 (below that a JetStream atomic batch, a fixed ~2.3 ms
// on one file-backed server, is slower than plain publishes: measured on
// nats-server 2.12) on an embedded single server under sync always, else 0 (off).
func groupCommitMin(cfg config.Config) int {
	if cfg.NATS.Mode == config.ModeEmbedded && cfg.NATS.Embedded.Sync == config.SyncAlways && cfg.Streams.Replicas <= 1 {
		return 8
	}
	return 0
}

// groupCommit is the group commit of the node's writers: on (see
// groupCommitMin) it lingers up to 2 ms after a round of 32 or more for the
// writers of that round to come back, so that under heavy load the batches
// stay large instead of splitting into two alternating halves.
func groupCommit(cfg config.Config) streams.GroupCommit {
	g := streams.GroupCommit{MinBatch: groupCommitMin(cfg)}
	if g.MinBatch > 0 {
		g.Linger, g.LingerFrom = 2*time.Millisecond, 32
	}
	return g
}

// receiptCommitter is the group commit of the workers' receipt writes: on
// when the log's is (one fsync per receipt otherwise; the receipts bucket
// allows atomic publish from its creation, see streams.Objects).
func receiptCommitter(cfg config.Config, js jetstream.JetStream, logger *slog.Logger) *streams.Committer {
	if groupCommitMin(cfg) == 0 {
		return nil
	}
	return streams.NewCommitter(js, wire.KVStream(streams.NamesFor(cfg.Namespace).Receipts),
		groupCommit(cfg), 10*time.Second, logger)
}

// Receipts is the group commit of the node's receipt writes (nil when off),
// for workers built outside the node (esjet bench).
func (n *Node) Receipts() *streams.Committer { return n.receipts }

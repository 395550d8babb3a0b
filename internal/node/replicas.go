package node

import (
	"log/slog"
	"net/url"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/config"
)

// ResolveReplicas returns cfg with streams.replicas decided when it is
// [config.ReplicasAuto]: 3 when nc's server is one of a cluster of three or
// more, else 1. An explicit setting is kept as it is. It logs what it
// decided and why, and warns when a cluster is too small to keep a copy of
// each stream through the loss of a server. logger may be nil.
//
// The cluster's size is what the server tells its clients: the client URLs
// of the cluster's members (its INFO's connect_urls, which nats.go adds to
// its server pool) together with the URLs the node was given. A cluster
// whose servers do not advertise counts the URLs given; list them all.
func ResolveReplicas(cfg config.Config, nc *nats.Conn, logger *slog.Logger) config.Config {
	if cfg.Streams.Replicas != config.ReplicasAuto {
		return cfg
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	servers := ClusterSize(nc)
	cfg.Streams.Replicas = 1
	switch {
	case cfg.NATS.Mode == config.ModeEmbedded:
	case servers >= 3:
		cfg.Streams.Replicas = 3
		logger.Info("streams.replicas not set: the namespace's streams are R3, on a cluster", "servers", servers,
			"cluster", nc.ConnectedClusterName())
	case servers == 2:
		logger.Warn("streams.replicas not set and the cluster has 2 servers: the namespace's streams are R1, and losing that server's disk loses acknowledged history; add a third server (R3), or set streams.replicas: 1 to say so",
			"cluster", nc.ConnectedClusterName())
	}
	return cfg
}

// ClusterSize is how many servers nc knows of in its server's cluster: 1
// for a server without a cluster.
func ClusterSize(nc *nats.Conn) int {
	if nc == nil || nc.ConnectedClusterName() == "" {
		return 1
	}
	hosts := map[string]bool{}
	for _, s := range nc.Servers() {
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			hosts[u.Host] = true
		}
	}
	return max(len(hosts), 1)
}

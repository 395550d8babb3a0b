// Command esjet (built from cmd/node) runs an esjet node — an embedded or
// external NATS JetStream with the namespace's event log — and the commands
// that inspect and drive it.
//
//	go build -o bin/esjet ./cmd/node
//	esjet                  # same as `esjet run`: the node, until SIGINT/SIGTERM
//	esjet send trip t1 request_trip '{…}'   # a command, through the NATS API
//	esjet state trip t1    # current state; esjet events trip t1: history
//	esjet streams          # streams, message counts, consumer lag
//	esjet outbox, reconcile, dlq           # operator tools
//	esjet provision [--dry-run]            # as admin: streams and buckets to the config
//	esjet server, demo-services, bench     # a plain JetStream, the demo's services, benchmarks
//	esjet version
//
// Where it sits: cmd wires everything and owns configuration. `esjet run`
// loads config (package config), starts internal/node (broker, streams,
// aggregate repository, API, relay, workers) and, for the demo, the trip
// aggregate and demo/services; the client commands speak to a running node
// only through its NATS micro API (internal/api), so they work the same
// against an embedded node and a cluster.
//
// Files: main.go (the process: signals, exit codes), root.go (global flags,
// config loading), one file per command family. A first SIGINT/SIGTERM
// drains the node; a second exits at once (130 for SIGINT, 143 for SIGTERM).
package main

// Package telemetry is what an operator sees of a node from outside:
// Prometheus metrics, OpenTelemetry traces, and the trace ids in the logs.
//
// One [Telemetry] per node (tests run several nodes in one process, so
// nothing here is global): its own Prometheus registry, served at /metrics
// by internal/node, and its own tracer provider, exporting where the
// standard OTEL_* environment variables say (nowhere by default).
//
// Where it sits: every other package reaches it through one-line calls on
// a *Telemetry that may be nil (then they do nothing and a traceparent
// passes through unchanged):
//
//	internal/api        StartCommand — the client's request, its W3C traceparent checked
//	internal/aggregate  Decided, Appended — decide and append latency;
//	                    StartOutcome — the outcome decision, child of the worker's span
//	internal/outbox     Relayed, RelayBatch — one span per command carried to OUTBOX
//	internal/consumer   StartDelivery, StartCall — the worker and the target call
//
// so a saga is one trace: request → decision → relay → worker → target →
// outcome decision → relay → … Figures the components already count
// (repository, relay and worker stats) and the JetStream backlog (relay
// lag, OUTBOX pending and in flight per kind, DLQ depth) are read when
// Prometheus scrapes ([Sources]), not counted twice.
package telemetry

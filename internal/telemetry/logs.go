package telemetry

import (
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/esjet/esjet/internal/wire"
)

// Log lines about a command carry its command_id, decision_id and trace_id,
// so a line, the command's trace and `esjet outbox <id>` meet.

// CommandLogger is logger with the ids of the command an OUTBOX message h
// carries.
func CommandLogger(logger *slog.Logger, h nats.Header) *slog.Logger {
	return logger.With("command_id", h.Get(wire.HeaderCommandID), "decision_id", h.Get(wire.HeaderDecisionID),
		"trace_id", TraceIDOf(h.Get(wire.HeaderTraceParent)))
}

package telemetry

import "errors"

// ErrExporter wraps the error [New] returns when the OTEL_* environment
// names a trace exporter this build cannot make.
var ErrExporter = errors.New("telemetry: trace exporter")

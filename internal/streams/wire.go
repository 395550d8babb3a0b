package streams

import "github.com/esjet/esjet/internal/wire"

// The decision's types are package wire's (the leaf that owns every name
// and byte esjet puts on JetStream, with the headers, the token rule and
// positions); they are aliased here so the log's API reads as it always
// did: a streams.Record is a wire.Record.
type (
	Decision = wire.Decision
	Event    = wire.Event
	Command  = wire.Command
	Record   = wire.Record
	Position = wire.Position
	LogEvent = wire.LogEvent
)

// Command priorities, as package wire defines them.
const (
	PriorityHigh   = wire.PriorityHigh
	PriorityNormal = wire.PriorityNormal
	PriorityLow    = wire.PriorityLow
)

package wire

import "errors"

var (
	// ErrNotACommand: an OUTBOX message is not an esjet command (no command
	// id header, or a payload that is not JSON). A worker dead-letters it.
	// Its text has no package prefix: it is the error a dead letter records.
	ErrNotACommand = errors.New("not an esjet command")
	// ErrBadCommandID: a command id is not <type>:<id>:<version>:<index>.
	ErrBadCommandID = errors.New("wire: bad command id")
)

package wire

import (
	"fmt"
	"strconv"
	"strings"
)

// CommandRef is a command id's parts: <type>:<id>:<version>:<index>. The id
// is deterministic (never random): a retried decision yields the same ids.
type CommandRef struct {
	AggregateType string
	AggregateID   string
	Version       uint64 // aggregate version of the issuing decision's last event
	Index         int    // the command's index in the decision
}

// String formats the id, as [CommandID] assigns it when a decision
// is stored.
func (r CommandRef) String() string {
	return CommandID(r.AggregateType, r.AggregateID, r.Version, r.Index)
}

// ParseCommandID splits a command id. An id that is not
// <type>:<id>:<version>:<index> (valid tokens, a positive version, a
// non-negative index) is an error wrapping [ErrBadCommandID] that shows the
// expected shape.
func ParseCommandID(id string) (CommandRef, error) {
	parts := strings.Split(id, ":")
	if len(parts) != 4 {
		return CommandRef{}, fmt.Errorf("%w %q: want <type>:<id>:<version>:<index>, e.g. trip:t1:4:0", ErrBadCommandID, id)
	}
	ref := CommandRef{AggregateType: parts[0], AggregateID: parts[1]}
	if err := ValidateToken("aggregate type", ref.AggregateType); err != nil {
		return CommandRef{}, fmt.Errorf("%w %q: %w", ErrBadCommandID, id, err)
	}
	if err := ValidateToken("aggregate id", ref.AggregateID); err != nil {
		return CommandRef{}, fmt.Errorf("%w %q: %w", ErrBadCommandID, id, err)
	}
	v, err := strconv.ParseUint(parts[2], 10, 64)
	if err != nil || v == 0 || parts[2] != strconv.FormatUint(v, 10) {
		return CommandRef{}, fmt.Errorf("%w %q: version %q is not a positive integer", ErrBadCommandID, id, parts[2])
	}
	i, err := strconv.Atoi(parts[3])
	if err != nil || i < 0 || parts[3] != strconv.Itoa(i) {
		return CommandRef{}, fmt.Errorf("%w %q: index %q is not a non-negative integer", ErrBadCommandID, id, parts[3])
	}
	ref.Version, ref.Index = v, i
	return ref, nil
}

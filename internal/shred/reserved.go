package shred

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/esjet/esjet/internal/wire"
)

// CheckReserved refuses data (an event's data or a command's payload as
// decided or appended, before sealing) that holds a sealed value
// ({"esjet:sealed": …}) at its top level, which only the node writes. The
// log's reader opens every top-level sealed value it finds, whatever the
// type marks personal, so a forged one that does not open (a made-up ref, a
// corrupt box) would fail every read of the record for everyone — the
// aggregate's history, the global log, each view that reads it — and one
// copied from another record would open there. The error wraps
// [ErrReserved].
func CheckReserved(data []byte) error {
	// Fast path: neither the word nor a JSON escape that could spell it.
	if !bytes.Contains(data, []byte("esjet")) && !bytes.Contains(data, []byte(`\`)) {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) != nil {
		return nil // not an object: nothing is opened
	}
	for name, raw := range obj {
		if len(raw) == 0 || raw[0] != '{' {
			continue
		}
		var inner map[string]json.RawMessage
		if json.Unmarshal(raw, &inner) != nil {
			continue
		}
		if _, ok := inner[wire.SealedMember]; ok {
			return fmt.Errorf("%w: member %q holds a sealed value ({%q: …}), which only the node writes when it seals a personal field", ErrReserved, name, wire.SealedMember)
		}
	}
	return nil
}

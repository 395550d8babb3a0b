package streams

import (
	"fmt"
	"strings"
	"time"
	"unsafe"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// DecodeCommands decodes a message read from the event stream as
// [DecodeRecord] does, with the same checks — it fails exactly where
// DecodeRecord fails — but keeps no events (Record.Events is nil): what a
// tool that reads a whole log for its commands and outcomes needs
// (reconcile), without building a slice of events and their strings for
// every decision. Upcasters are not applied.
func DecodeCommands(m *jetstream.RawStreamMsg) (Record, error) {
	d, decided, err := decodeLean(m.Data)
	if ee := newerEnvelope(m, err); ee != nil {
		return Record{}, ee
	}
	rec, err := recordOf(m, d, err)
	rec.Decided = decided
	return rec, err
}

// leanEvents is what [Decode] checks of a decision's events, gathered
// while they are parsed and dropped.
type leanEvents struct {
	n        int
	prev     uint64    // the last event's version
	firstErr error     // the first event that fails Decode's checks
	first    time.Time // the first event's time ([Record].Decided)
}

// decodeLean is [Decode] without keeping the events, but for the first
// one's time.
func decodeLean(data []byte) (Decision, time.Time, error) {
	var env envelope
	var evs leanEvents
	err := decodeEnvelopeInto(data, &env, &evs)
	if err != nil {
		return Decision{}, time.Time{}, err
	}
	// Decode's checks, in its order.
	dec := env.Decision
	if err := checkHead(env.V, &dec); err != nil {
		return dec, time.Time{}, err
	}
	if evs.n == 0 {
		return dec, time.Time{}, fmt.Errorf("envelope: no events")
	}
	if evs.firstErr != nil {
		return dec, time.Time{}, evs.firstErr
	}
	if err := checkCommands(&dec); err != nil {
		return dec, time.Time{}, err
	}
	if dec.CorrelationID == "" {
		dec.CorrelationID = dec.ID
	}
	return dec, evs.first, nil
}

// leanEventList parses a decision's events as [envDecoder.leanEvent] does.
func (d *envDecoder) leanEventList(evs *leanEvents) error {
	*evs = leanEvents{} // a repeated key: the last one counts, as in decodeList
	_, err := d.array(func() error { return d.leanEvent(evs) })
	return err
}

// leanEvent parses one event as [envDecoder.event] does and checks it as
// [Decode] does, keeping only its version.
func (d *envDecoder) leanEvent(evs *leanEvents) error {
	var typ string
	var version uint64
	err := d.object(func(key string) error {
		var err error
		switch fold(key, eventKeys) {
		case "id":
			_, err = d.strViewOrNull()
		case "type":
			typ, err = d.strViewOrNull()
		case "schema":
			_, _, err = d.int()
		case "version":
			version, err = d.uint64()
		case "time":
			var t time.Time
			if err = d.time(&t); err == nil && evs.n == 0 {
				evs.first = t
			}
		case "data":
			_, err = d.skipValid()
		default:
			_, err = d.skipValid()
		}
		return err
	})
	if err != nil {
		return err
	}
	i := evs.n
	evs.n++
	if evs.firstErr == nil {
		if typ == wire.EventArchived && i == 0 {
			// a tombstone's (archive.go); Decode checks it is alone
		} else if err := wire.ValidateToken("event type", typ); err != nil {
			if te, ok := err.(*wire.TokenError); ok {
				te.Value = strings.Clone(te.Value) // typ is a view of the message
			}
			evs.firstErr = err
		} else if version == 0 || (i > 0 && version != evs.prev+1) {
			evs.firstErr = fmt.Errorf("envelope: event %d has version %d, not contiguous", i, version)
		}
	}
	evs.prev = version
	return nil
}

// strViewOrNull reads a string as strOrNull does; a plain one (no escapes,
// ASCII) is returned as a view of the message, not a copy: for checks
// only, never to keep.
func (d *envDecoder) strViewOrNull() (string, error) {
	if d.null() {
		return "", nil
	}
	if d.peek() != '"' {
		return "", d.fail("expected a string")
	}
	start := d.i + 1
	for j := start; j < len(d.b); j++ {
		c := d.b[j]
		switch {
		case c == '"':
			d.i = j + 1
			if j == start {
				return "", nil
			}
			return unsafe.String(&d.b[start], j-start), nil
		case c == '\\' || c < 0x20 || c >= 0x80:
			return d.str() // the careful way, from the opening quote
		}
	}
	return d.str() // unterminated: str says so
}

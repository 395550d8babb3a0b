package outbox

import (
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
)

// stopsAt reports whether the relay must stop before decision m (at seq,
// decoded with decodeErr): a newer build wrote it, in an envelope version
// this build does not read. Its commands cannot be read, and skipping it
// would lose them, so the relay goes no further — it tries again, as after
// a failed publish, until a node of that build relays it. Counted
// ([RelayStats].TooNew) and logged at ERROR once per decision.
func (r *Relay) stopsAt(m jetstream.Msg, seq uint64, decodeErr error) bool {
	err := streams.EnvelopeTooNew(m.Headers(), seq, m.Subject())
	if err == nil && errors.Is(decodeErr, streams.ErrEnvelopeTooNew) {
		err = decodeErr
	}
	if err == nil {
		return false
	}
	r.tooNew.Add(1)
	if r.tooNewSeq.Swap(seq) != seq {
		r.logger.Error("relay: a newer build wrote this decision; the relay stops before it until a node of that build relays it (upgrade this node)",
			"subject", m.Subject(), "seq", seq, "error", err)
	}
	return true
}

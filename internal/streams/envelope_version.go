package streams

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrEnvelopeTooNew is wrapped by [*EnvelopeError]: a message esjet wrote
// with an envelope version newer than this build reads. It is not a foreign
// message to step over: the aggregate's history goes on in it, so a load,
// a scan or the relay stops there, loudly, rather than decide on a state
// that misses it. The API answers 503 envelope_too_new.
var ErrEnvelopeTooNew = errors.New("streams: envelope version newer than this node reads")

// EnvelopeError names a message whose envelope version this build does not
// read. It wraps [ErrEnvelopeTooNew].
type EnvelopeError struct {
	Seq     uint64
	Subject string
	Version int
}

func (e *EnvelopeError) Error() string {
	where := "a message"
	if e.Subject != "" {
		where = fmt.Sprintf("message seq %d on %s", e.Seq, e.Subject)
	}
	return fmt.Sprintf("%s has envelope version %d, newer than this node reads (%d): a newer build wrote it; "+
		"this aggregate is served by nodes of that build only (upgrade this node), the node refuses rather than guess",
		where, e.Version, wire.EnvelopeVersion)
}

func (e *EnvelopeError) Unwrap() error { return ErrEnvelopeTooNew }

// EnvelopeTooNew returns an [*EnvelopeError] when a message's headers say
// esjet wrote it with an envelope version newer than this build's, else nil.
// A version that is not a number above this build's is left to the decoder
// (an older or garbled header is a foreign message, as before).
func EnvelopeTooNew(h nats.Header, seq uint64, subject string) error {
	v, err := strconv.Atoi(h.Get(wire.HeaderEnvelope))
	if err != nil || v <= wire.EnvelopeVersion {
		return nil
	}
	return &EnvelopeError{Seq: seq, Subject: subject, Version: v}
}

// newerEnvelope is the [*EnvelopeError] of m when its header or its
// payload (decodeErr, from [Decode]) says a newer envelope version.
func newerEnvelope(m *jetstream.RawStreamMsg, decodeErr error) error {
	if err := EnvelopeTooNew(m.Header, m.Sequence, m.Subject); err != nil {
		return err
	}
	var ee *EnvelopeError
	if errors.As(decodeErr, &ee) {
		return &EnvelopeError{Seq: m.Sequence, Subject: m.Subject, Version: ee.Version}
	}
	return nil
}

package raw

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/esjet/esjet/internal/wire"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Appender appends a copy of one message (same data, same headers, a fresh
// Nats-Msg-Id) to one subject per aggregate with the expectation an esjet
// append carries: the subject's last sequence as this appender last saw it.
// Like esjet's repository it serialises writes to one aggregate in-process
// (a lock per subject), so it is safe for concurrent use, and reports the
// writes that had to wait for another on the same aggregate.
type Appender struct {
	subjects []string
	last     []uint64
	locks    []sync.Mutex
	data     []byte
	header   nats.Header
}

// NewAppender appends data with header to subjects[a] for aggregate a.
// Nats-Expected-* headers in header (a message read back from a stream
// keeps them) are dropped: Append sets its own expectation.
func NewAppender(subjects []string, data []byte, header nats.Header) *Appender {
	r := &Appender{subjects: subjects, last: make([]uint64, len(subjects)),
		locks: make([]sync.Mutex, len(subjects)), data: data, header: nats.Header{}}
	for k, v := range header {
		if !strings.HasPrefix(k, wire.HeaderExpectedPrefix) {
			r.header[k] = v
		}
	}
	return r
}

// Append publishes the message to aggregate a's subject on js. The same
// appender may be used over several connections: the expectations are
// per subject, not per connection.
func (r *Appender) Append(ctx context.Context, js jetstream.JetStream, a int) (waited bool, err error) {
	if !r.locks[a].TryLock() {
		waited = true
		r.locks[a].Lock()
	}
	defer r.locks[a].Unlock()
	ack, err := js.PublishMsg(ctx, r.message(a), jetstream.WithExpectLastSequencePerSubject(r.last[a]))
	if err != nil {
		return waited, err
	}
	r.last[a] = ack.Sequence
	return waited, nil
}

// message is a fresh copy of the message for aggregate a's subject, with
// a Msg-Id of its own and room for the expectation and batch headers.
func (r *Appender) message(a int) *nats.Msg {
	m := &nats.Msg{Subject: r.subjects[a], Data: r.data, Header: make(nats.Header, len(r.header)+5)}
	for k, v := range r.header {
		m.Header[k] = v
	}
	m.Header.Set(jetstream.MsgIDHeader, uuid.NewString())
	return m
}

// IsConflict reports whether err is JetStream refusing an append because
// the subject's last sequence was not the expected one: 10071 on a single
// server, 10164 ("wrong last sequence") on a cluster.
func IsConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == 10071 || apiErr.ErrorCode == 10164)
}

package streams

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// lastReader reads the last message of subjects of one stream for its
// committer, whose writes it waits behind: a read made while no round is in
// flight is a last_by_subj direct get at once, as kv.Get's; the reads made
// while a round is in flight wait for it and go out together, as one
// multi_last direct get (2.11+), before the next round starts.
//
// Why: a direct get waits for a write in flight on its stream (the
// server's isolation lock, which an atomic batch's commit holds through
// its fsyncs), and a connection's direct gets are served one after another
// in its read loop. So N workers each reading a receipt during a receipts
// round paid N gets in a row once it returned, before the next round could
// fill; read together they pay one, and never wait behind the next round.
type lastReader struct {
	g       *batchGetter
	timeout time.Duration
}

// lastRead is one read waiting for the round in flight.
type lastRead struct {
	subject string
	msg     *jetstream.RawStreamMsg
	err     error
	done    chan struct{}
}

// maxMultiLast caps the subjects of one multi_last request: the server
// answers at most 1,024 messages to one.
const maxMultiLast = 1000

func newLastReader(js jetstream.JetStream, stream string, timeout time.Duration) *lastReader {
	return &lastReader{g: newBatchGetter(js, stream), timeout: timeout}
}

// one reads the last message on subject now, or returns
// jetstream.ErrMsgNotFound.
func (r *lastReader) one(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	m, err := r.g.one(ctx, batchRequest{LastFor: subject})
	if errors.Is(err, errNoMessages) {
		return nil, jetstream.ErrMsgNotFound
	}
	return m, err
}

// serve reads reads' subjects, maxMultiLast to a request, and finishes
// each read with its message, jetstream.ErrMsgNotFound or the request's
// error.
func (r *lastReader) serve(reads []*lastRead) {
	for len(reads) > 0 {
		n := min(len(reads), maxMultiLast)
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		found, err := r.many(ctx, reads[:n])
		cancel()
		for _, rd := range reads[:n] {
			switch m, ok := found[rd.subject]; {
			case err != nil:
				rd.err = err
			case ok:
				rd.msg = m
			default:
				rd.err = jetstream.ErrMsgNotFound
			}
			close(rd.done)
		}
		reads = reads[n:]
	}
}

// each reads subjects one at a time into found.
func (r *lastReader) each(ctx context.Context, subjects []string, found map[string]*jetstream.RawStreamMsg) (map[string]*jetstream.RawStreamMsg, error) {
	for _, s := range subjects {
		m, err := r.one(ctx, s)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		found[s] = m
	}
	return found, nil
}

// many reads the last message of each read's subject. A subject missing
// from the result has no message: the server says how many of the found
// ones it did not send (a reply cut at max_bytes), and those are asked for
// again, so a cut reply never reads as "none".
func (r *lastReader) many(ctx context.Context, reads []*lastRead) (map[string]*jetstream.RawStreamMsg, error) {
	found := make(map[string]*jetstream.RawStreamMsg, len(reads))
	want := make([]string, 0, len(reads))
	seen := make(map[string]bool, len(reads))
	for _, rd := range reads {
		if !seen[rd.subject] {
			seen[rd.subject] = true
			want = append(want, rd.subject)
		}
	}
	for first := true; len(want) > 0; first = false {
		got, pending, err := r.g.get(ctx, batchRequest{MultiLast: want, Batch: len(want)}, func(m *jetstream.RawStreamMsg) error {
			if seen[m.Subject] {
				found[m.Subject] = m
			}
			return nil
		})
		if errors.Is(err, errNoMessages) {
			if first && noResults(err) {
				return found, nil // none of them has a message
			}
			// A message that matches could not be loaded (or a cut
			// reply's rest is not there any more): read the rest one by
			// one, each as kv.Get would, so one bad message does not
			// read as "none" for the others.
			return r.each(ctx, want, found)
		}
		if err != nil {
			return nil, err
		}
		if pending == 0 {
			return found, nil
		}
		if got == 0 {
			return nil, fmt.Errorf("direct get from %s: %d message(s) pending, none sent", r.g.subject, pending)
		}
		rest := want[:0:0]
		for _, s := range want {
			if found[s] == nil {
				rest = append(rest, s)
			}
		}
		want = rest
	}
	return found, nil
}

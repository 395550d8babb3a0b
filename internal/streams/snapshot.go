package streams

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
)

// Reads of several subjects as ONE copy of a stream held them.
//
// A direct get is answered by whichever replica in sync draws it (a queue
// group over the stream's servers, and a mirror's with mirror_direct), and
// "in sync" is the replica's own view: one a moment behind answers from
// what it has. Two gets in a row may so be answered by two copies at two
// points of the stream. Where the second read must be as new as the first
// says (a view's checkpoint says position P is applied; the document read
// next must hold P), that is a wrong answer, not a slow one.
//
// One multi_last direct get (2.11+) is answered by one copy, under the
// stream's isolation lock, up to its last sequence at that instant: every
// subject's last message as of one point of the stream. A copy that is
// behind answers with an older point, never a mix. This costs one direct
// get, served by any replica; the alternative, asking the stream leader
// ($JS.API.STREAM.MSG.GET, which only the leader answers) for each read,
// takes the JetStream API queue of every server and puts every read on
// one server.

// SnapshotReader reads the last message of subjects of one stream as one
// copy held them at one instant. Safe for concurrent use; Close it when
// done.
type SnapshotReader struct {
	g      *batchGetter
	closed atomic.Bool
}

// snapshotMaxBytes bounds one snapshot's reply: larger than any message
// (max_message_size is at most 8 MiB) plus a few hundred small ones, so a
// reply is never cut (a cut reply would need a second request, which
// another copy may answer).
const snapshotMaxBytes = 16 << 20

// ErrSnapshotCut is returned when a copy answered a snapshot only in part
// (more than [snapshotMaxBytes]): read again, or fewer subjects.
var ErrSnapshotCut = errors.New("streams: snapshot reply cut short")

// NewSnapshotReader returns a reader of stream's subjects over js's
// connection.
func NewSnapshotReader(js jetstream.JetStream, stream string) *SnapshotReader {
	return &SnapshotReader{g: newBatchGetter(js, stream)}
}

// Read returns the last message of each subject (up to [maxMultiLast]
// of them) as one copy of the stream held them: a subject with no message
// is missing from the map. A delete marker (a KV delete or purge) is a
// message like any other.
func (r *SnapshotReader) Read(ctx context.Context, subjects []string) (map[string]*jetstream.RawStreamMsg, error) {
	if r.closed.Load() {
		return nil, fmt.Errorf("snapshot reader of %s is closed", r.g.stream)
	}
	if len(subjects) == 0 || len(subjects) > maxMultiLast {
		return nil, fmt.Errorf("snapshot of %s: %d subjects, want 1 to %d", r.g.stream, len(subjects), maxMultiLast)
	}
	want := make(map[string]bool, len(subjects))
	for _, s := range subjects {
		want[s] = true
	}
	found := make(map[string]*jetstream.RawStreamMsg, len(subjects))
	_, pending, err := r.g.get(ctx, batchRequest{MultiLast: subjects, Batch: len(subjects), MaxBytes: snapshotMaxBytes}, func(m *jetstream.RawStreamMsg) error {
		if want[m.Subject] {
			found[m.Subject] = m
		}
		return nil
	})
	switch {
	case errors.Is(err, errNoMessages) && noResults(err):
		return found, nil // none of them has a message
	case err != nil:
		return nil, fmt.Errorf("snapshot of %s: %w", r.g.stream, err)
	case pending > 0:
		return nil, fmt.Errorf("%w: %s: %d message(s) not sent", ErrSnapshotCut, r.g.stream, pending)
	}
	return found, nil
}

// Close removes the reader's reply subscription. It is idempotent.
func (r *SnapshotReader) Close() error {
	r.closed.Store(true)
	closed := false
	r.g.once.Do(func() {
		r.g.subErr = fmt.Errorf("snapshot reader of %s is closed", r.g.stream)
		closed = true
	})
	r.g.mu.Lock()
	sub := r.g.sub
	r.g.sub = nil
	r.g.mu.Unlock()
	if closed || sub == nil {
		return nil
	}
	return sub.Unsubscribe()
}

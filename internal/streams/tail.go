package streams

import (
	"context"
	"errors"
	"strconv"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Reading one aggregate's messages after a sequence, at a cost that follows
// the aggregate, not the log.
//
// A subject-filtered read from the middle of the stream makes the server
// walk the per-block subject index of every block between the subject's
// first (or last) message and the start, loading each cold block whole
// from disk to build it: an aggregate with ten decisions spread over a
// million-message log read dozens of 8 MB blocks, and its cold-load tail
// and the node's memory followed the log. Instead the read goes backwards
// along the chain every esjet append leaves behind: a decision stored
// under Nats-Expected-Last-Subject-Sequence N was, when the server took it,
// the first message on its subject after N — so from the subject's last
// message, N is the one before it. Each step is one direct get of one
// message (one block). Where the messages left to read are dense in the
// log (most of the range is the aggregate's own), one unfiltered range
// read is cheaper than the steps and is used instead. A message without
// the header (written by something else), a step that lands on another
// subject or out of version order (a stream whose sequences are not the
// ones its writers expected, e.g. one that sources another), or a deleted
// message ends the walk, and the rest is read the old way.

// denseFloor is how many messages between two of an aggregate's a range
// read takes at least instead of stepping. A range read costs the server
// and the client about as much per message as a step costs per round trip
// over a few messages (measured: 100–200 messages of others' took 3–15 ms
// on a loaded machine, a step ~0.1 ms), so it pays only where the range is
// mostly the aggregate's own.
const denseFloor = 8

// denseRatio: a range read is taken when the range holds at most this many
// log messages per version the aggregate may still have in it.
const denseRatio = 2

// tailMsgs returns the messages on subject after sequence after.Seq, in
// order, foreign ones included (the caller decodes and checks them).
func (l *Log) tailMsgs(ctx context.Context, subject string, after Position) ([]*jetstream.RawStreamMsg, error) {
	last, err := l.getter.one(ctx, batchRequest{LastFor: subject})
	if errors.Is(err, errNoMessages) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if last.Sequence <= after.Seq {
		return nil, nil
	}
	chain := []*jetstream.RawStreamMsg{last} // newest first
	var head []*jetstream.RawStreamMsg       // what the walk left, oldest first
	cur := last
	for {
		between := cur.Sequence - after.Seq - 1
		if between == 0 {
			break
		}
		curRec, curErr := decodeRaw(cur)
		if curErr == nil && wire.IsTombstone(curRec) {
			break // it stands for everything before it (archive.go)
		}
		if between <= denseSpan(after, curRec, curErr) {
			head, err = l.rangeMsgs(ctx, subject, after.Seq+1, cur.Sequence-1)
			break
		}
		if between <= filteredSpan(after, curRec, curErr) {
			head, err = l.filteredMsgs(ctx, subject, after.Seq+1, cur.Sequence-1)
			break
		}
		prev, ok := expectedPrev(cur)
		if !ok || curErr != nil || prev >= cur.Sequence {
			head, err = l.filteredMsgs(ctx, subject, after.Seq+1, cur.Sequence-1)
			break
		}
		if prev <= after.Seq {
			break
		}
		m, err2 := l.getter.one(ctx, batchRequest{Seq: prev})
		if err2 != nil && !errors.Is(err2, errNoMessages) {
			return nil, err2
		}
		if err2 != nil || !precedes(m, subject, curRec) {
			head, err = l.filteredMsgs(ctx, subject, after.Seq+1, cur.Sequence-1)
			break
		}
		chain = append(chain, m)
		cur = m
	}
	if err != nil {
		return nil, err
	}
	for i := len(chain) - 1; i >= 0; i-- {
		head = append(head, chain[i])
	}
	return head, nil
}

// denseSpan is how many messages between after and cur a range read takes:
// denseRatio per version the aggregate may still have there, at least
// denseFloor. When after names a sequence only, its version is unknown.
func denseSpan(after Position, cur Record, curErr error) uint64 {
	span := uint64(denseFloor)
	if curErr != nil || (after.Seq > 0 && after.Version == 0) || cur.FirstVersion() <= after.Version {
		return span
	}
	return max(span, denseRatio*(cur.FirstVersion()-1-after.Version))
}

// A long tail (many versions left) in a range of few blocks is cheaper as a
// subject-filtered read — one request per LoadBatch of the aggregate's
// messages, the server walking the subject index of each block in the
// range — than as one round trip per version (a 1,000-version aggregate
// without snapshots took 1,000 steps: ~7× the filtered read). The blocks
// are guessed from the range's length at filteredMsgBytes a message (file
// store blocks of a limits stream hold 8 MB); the filtered read is taken
// when that guess is at most one block per filteredPerBlock versions, so
// even with messages 8× larger on average than guessed it touches no more
// blocks than the walk could.
const (
	filteredMsgBytes = 4 << 10
	filteredBlock    = 8 << 20
	filteredPerBlock = 8
)

// filteredSpan is how many messages between after and cur a filtered read
// takes instead of the walk: none unless the aggregate may have at least
// 2·filteredPerBlock versions there.
func filteredSpan(after Position, cur Record, curErr error) uint64 {
	if curErr != nil || (after.Seq > 0 && after.Version == 0) || cur.FirstVersion() <= after.Version {
		return 0
	}
	left := cur.FirstVersion() - 1 - after.Version
	if left < 2*filteredPerBlock {
		return 0
	}
	return (left/filteredPerBlock - 1) * (filteredBlock / filteredMsgBytes)
}

// expectedPrev is the sequence m's writer expected its subject to stand at.
func expectedPrev(m *jetstream.RawStreamMsg) (uint64, bool) {
	v := m.Header.Get(jetstream.ExpectedLastSubjSeqHeader)
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}

// precedes reports whether m is the decision right before next on subject:
// a step of the walk is taken only when it lands where it should.
func precedes(m *jetstream.RawStreamMsg, subject string, next Record) bool {
	if m.Subject != subject {
		return false
	}
	rec, err := decodeRaw(m)
	return err == nil && rec.LastVersion()+1 == next.FirstVersion()
}

// rangeMsgs reads every message of the log from from to upTo (inclusive)
// and keeps those on subject. Unfiltered, the server counts what is
// pending without walking blocks.
func (l *Log) rangeMsgs(ctx context.Context, subject string, from, upTo uint64) ([]*jetstream.RawStreamMsg, error) {
	var out []*jetstream.RawStreamMsg
	for from <= upTo {
		batch := int(min(upTo-from+1, uint64(l.cfg.LoadBatch)))
		got, _, err := l.getter.get(ctx, batchRequest{Seq: from, Batch: batch}, func(m *jetstream.RawStreamMsg) error {
			if m.Sequence > upTo {
				return errStop
			}
			from = m.Sequence + 1
			if m.Subject == subject {
				out = append(out, m)
			}
			return nil
		})
		if errors.Is(err, errNoMessages) || errors.Is(err, errStop) || (err == nil && got == 0) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// filteredMsgs reads the messages on subject from from to upTo with a
// subject-filtered batch: the way every load went before the walk, kept
// for what the walk cannot follow.
func (l *Log) filteredMsgs(ctx context.Context, subject string, from, upTo uint64) ([]*jetstream.RawStreamMsg, error) {
	var out []*jetstream.RawStreamMsg
	for from <= upTo {
		got, pending, err := l.getter.get(ctx, batchRequest{Seq: from, NextFor: subject, Batch: l.cfg.LoadBatch}, func(m *jetstream.RawStreamMsg) error {
			if m.Sequence > upTo {
				return errStop
			}
			from = m.Sequence + 1
			out = append(out, m)
			return nil
		})
		if errors.Is(err, errNoMessages) || errors.Is(err, errStop) {
			break
		}
		if err != nil {
			return nil, err
		}
		if got == 0 || pending == 0 {
			break
		}
	}
	return out, nil
}

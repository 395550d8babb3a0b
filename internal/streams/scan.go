package streams

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrStopScan, returned by a [Scanner.Scan] callback, ends the scan early
// without an error.
var ErrStopScan = errors.New("streams: stop scan")

// Scanner reads one stream's stored messages in stream order with batched
// direct gets: one round trip per batch, no consumer. It is for tools that
// read whole streams (reconciliation, inspection) — EVENTS, OUTBOX, the DLQ
// or a KV bucket's stream (KV_<bucket>). The stream must allow direct get.
//
// Scan may be called concurrently; Close must not overlap a Scan.
type Scanner struct {
	getter *batchGetter
	stream string
	batch  int
}

// NewScanner returns a Scanner of stream. batch is the most messages one
// request asks for; ≤ 0 means 1000.
func NewScanner(js jetstream.JetStream, stream string, batch int) *Scanner {
	if batch <= 0 {
		batch = 1000
	}
	return &Scanner{getter: newBatchGetter(js, stream), stream: stream, batch: batch}
}

// Close removes the scanner's reply subscription. It is idempotent.
func (s *Scanner) Close() error {
	// Make a later subscribe a no-op that reports the scanner closed, and
	// drop the subscription if one was made.
	closed := false
	s.getter.once.Do(func() {
		s.getter.subErr = fmt.Errorf("scanner of %s is closed", s.stream)
		closed = true
	})
	if closed || s.getter.sub == nil {
		return nil
	}
	err := s.getter.sub.Unsubscribe()
	s.getter.sub = nil
	return err
}

// ScanRange selects the messages a [Scanner.Scan] reads.
type ScanRange struct {
	// Filter is the subject filter; "" means every subject of the stream.
	Filter string
	// From is the first stream sequence to read; 0 means the beginning
	// (or Since, when set).
	From uint64
	// Since, when set and From is 0, starts at the first message stored
	// at or after this server time.
	Since time.Time
	// To is the last stream sequence to read; 0 means up to the end of the
	// stream as it is while the scan runs (messages stored meanwhile are
	// read too). A scan with a To reads every message up to it even when
	// a replica that is behind answers: where the direct gets end early,
	// the stream leader is asked (leaderget.go).
	To uint64
	// ToLeaderLast, with To 0, sets To to the stream's last sequence as its
	// leader reports it when the scan starts: for reads that decide what
	// to publish, which a lagging replica must not answer short.
	ToLeaderLast bool
}

// Scan calls fn for each stored message of the range, in stream order, and
// returns how many it passed to fn. A stream that has none is not an error.
// fn may return [ErrStopScan] to end the scan; any other error ends it and
// is returned. The message passed to fn is fn's to keep.
func (s *Scanner) Scan(ctx context.Context, r ScanRange, fn func(*jetstream.RawStreamMsg) error) (int, error) {
	req := batchRequest{Seq: r.From, NextFor: r.Filter}
	if req.Seq == 0 {
		if r.Since.IsZero() {
			req.Seq = 1
		} else {
			since := r.Since
			req.StartTime = &since
		}
	}
	if req.NextFor == ">" {
		req.NextFor = "" // the server steps over every subject by itself
	}
	if r.To == 0 && r.ToLeaderLast {
		last, err := s.getter.leaderLast(ctx)
		if err != nil {
			return 0, fmt.Errorf("scan %s: %w", s.stream, err)
		}
		if last == 0 || (req.StartTime == nil && last < req.Seq) {
			return 0, nil
		}
		r.To = last
	}
	total := 0
	for {
		if r.To > 0 && req.StartTime == nil && req.Seq > r.To {
			return total, nil
		}
		req.Batch = s.batch
		if r.To > 0 && req.StartTime == nil && r.To-req.Seq+1 < uint64(req.Batch) {
			req.Batch = int(r.To - req.Seq + 1)
		}
		var stopped bool
		got, pending, err := s.getter.get(ctx, req, func(m *jetstream.RawStreamMsg) error {
			if r.To > 0 && m.Sequence > r.To {
				stopped = true
				return errStop
			}
			req.StartTime, req.Seq = nil, m.Sequence+1
			total++
			if err := fn(m); err != nil {
				if errors.Is(err, ErrStopScan) {
					stopped = true
					return errStop
				}
				return err
			}
			return nil
		})
		switch {
		case stopped:
			return total, nil
		case err != nil && !errors.Is(err, errNoMessages):
			return total, fmt.Errorf("scan %s: %w", s.stream, err)
		case err == nil && got > 0 && pending > 0:
			// pending, not got < batch, says whether more match: the
			// server also ends a batch early at its max-bytes limit.
			continue
		case r.To == 0:
			return total, nil
		}
		// The direct gets end here; the leader says whether anything up to
		// To is left (a replica behind answered).
		m, err := s.getter.leaderNext(ctx, req.Seq, req.StartTime, req.NextFor)
		if errors.Is(err, errNoMessages) || (err == nil && m.Sequence > r.To) {
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("scan %s: %w", s.stream, err)
		}
		req.StartTime, req.Seq = nil, m.Sequence+1
		total++
		if err := fn(m); err != nil {
			if errors.Is(err, ErrStopScan) {
				return total, nil
			}
			return total, err
		}
	}
}

// DecodeRecord decodes a message read from the event stream (by a
// [Scanner]) into a Record. Upcasters are not applied: it is for tools that
// read decisions and commands, not for folding events.
func DecodeRecord(m *jetstream.RawStreamMsg) (Record, error) { return decodeRaw(m) }

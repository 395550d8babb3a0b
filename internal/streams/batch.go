package streams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// JetStream's atomic batch headers (nats-server 2.12+; nats.go has no batch
// API) are wire's: every message of a batch carries the id and its 1-based
// position; the last one also carries the commit marker and is the only one
// answered.
const (
	headerBatchID     = wire.HeaderBatchID
	headerBatchSeq    = wire.HeaderBatchSeq
	headerBatchCommit = wire.HeaderBatchCommit
)

// Error codes of a refused batch: every error comes on the commit reply,
// the first failure only (nats-server 2.12+).
const (
	codeWrongLastSeq   = 10071 // one stale expectation; names the subject's last sequence
	codeBatchDuplicate = 10201 // a Msg-Id already stored or twice in the batch; names nothing
)

// batchAck is the commit's reply.
type batchAck struct {
	Stream   string              `json:"stream"`
	Sequence uint64              `json:"seq"`
	Domain   string              `json:"domain,omitempty"`
	BatchID  string              `json:"batch,omitempty"`
	Count    int                 `json:"count,omitempty"`
	Error    *jetstream.APIError `json:"error,omitempty"`
}

// batch commits members as one atomic batch and finishes each with the
// outcome of its own message. A refused batch is split:
//   - 10071 names the last sequence of the subject whose expectation was
//     stale: that member gets the 10071 (Append resolves it as a conflict,
//     or finds its own decision there) and the rest are committed again;
//   - 10201 (a duplicate Msg-Id: some member is a retry of a stored
//     decision) and anything else that names no member: each member is
//     published on its own and gets its own answer;
//   - a timeout or no responder is ambiguous for every member: each gets
//     it, and Append's retry and tail read decide each one.
func (c *committer) batch(members []*pending) {
	for {
		if len(members) < max(c.cfg.MinBatch, 2) {
			c.plain(members)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		ack, err := c.commitBatch(ctx, members)
		if c.afterCommit != nil {
			err = c.afterCommit(err)
		}
		if err == nil {
			cancel()
			c.count(func(s *commitStats) { s.batches++; s.batched += uint64(len(members)) })
			first := ack.Sequence - uint64(len(members)) + 1
			for i, p := range members {
				p.finish(&jetstream.PubAck{Stream: ack.Stream, Sequence: first + uint64(i), Domain: ack.Domain}, nil)
			}
			return
		}
		if ambiguous(ctx, err) || errors.Is(err, context.DeadlineExceeded) {
			cancel()
			c.logger.Warn("atomic batch timed out; each append resolves on its own", "appends", len(members), "error", err)
			for _, p := range members {
				p.finish(nil, err)
			}
			return
		}
		stale, rest := c.stale(ctx, members, err)
		cancel()
		if len(stale) == 0 {
			c.count(func(s *commitStats) { s.fallbacks++ })
			if apiErr := (*jetstream.APIError)(nil); !errors.As(err, &apiErr) || apiErr.ErrorCode != codeBatchDuplicate {
				c.logger.Warn("atomic batch refused; publishing its appends one by one", "appends", len(members), "error", err)
			}
			c.plain(members)
			return
		}
		c.count(func(s *commitStats) { s.splits++ })
		for _, p := range stale {
			p.finish(nil, err)
		}
		members = rest
	}
}

func (c *committer) count(f func(*commitStats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

// stale splits members after a refused batch: those on the subject a 10071
// names, and the rest. It returns no stale members when err is not a 10071
// naming a sequence, or when the sequence's subject is no member's.
func (c *committer) stale(ctx context.Context, members []*pending, err error) (stale, rest []*pending) {
	seq, ok := wrongLastSeq(err)
	if !ok || seq == 0 {
		return nil, members
	}
	subject, serr := c.subjectAt(ctx, seq)
	if serr != nil {
		c.logger.Warn("read the subject a refused batch named", "seq", seq, "error", serr)
		return nil, members
	}
	for _, p := range members {
		if p.msg.Subject == subject {
			stale = append(stale, p)
		} else {
			rest = append(rest, p)
		}
	}
	if len(stale) == 0 {
		return nil, members
	}
	return stale, rest
}

// wrongLastSeq reads N from a 10071 "wrong last sequence: N".
func wrongLastSeq(err error) (uint64, bool) {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != codeWrongLastSeq {
		return 0, false
	}
	i := strings.LastIndex(apiErr.Description, ":")
	if i < 0 {
		return 0, false
	}
	n, perr := strconv.ParseUint(strings.TrimSpace(apiErr.Description[i+1:]), 10, 64)
	return n, perr == nil
}

// commitBatch sends members as one atomic batch and waits for the
// commit's reply.
func (c *committer) commitBatch(ctx context.Context, members []*pending) (batchAck, error) {
	msgs := make([]*nats.Msg, len(members))
	for i, p := range members {
		msgs[i] = p.msg
	}
	return sendBatch(ctx, c.js.Conn(), msgs)
}

// PublishAtomic stores msgs (at most 1,000, on a stream that allows atomic
// publish) as one atomic batch: all of them, in order, with one durable
// write, or none. It returns the stream sequence of the first message.
// A refused batch stored nothing: [IsBatchDuplicate] tells a duplicate
// Msg-Id (some message is already in the stream) from other refusals; a
// timeout leaves the batch's fate unknown, as a publish in flight.
func PublishAtomic(ctx context.Context, nc *nats.Conn, msgs []*nats.Msg) (first uint64, err error) {
	ack, err := sendBatch(ctx, nc, msgs)
	if err != nil {
		return 0, err
	}
	return ack.Sequence - uint64(len(msgs)) + 1, nil
}

// IsBatchDuplicate reports whether err is an atomic batch refused because
// one of its Msg-Ids was already stored (or twice in the batch): 10201,
// which names no message.
func IsBatchDuplicate(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == codeBatchDuplicate
}

// sendBatch publishes msgs (copies of them, with the batch headers) as one
// atomic batch and waits for the commit's reply. Only the commit message
// is answered: the others go out as plain publishes on the same
// connection, in order.
func sendBatch(ctx context.Context, nc *nats.Conn, msgs []*nats.Msg) (batchAck, error) {
	id := nuid.Next()
	var resp *nats.Msg
	for i, src := range msgs {
		m := &nats.Msg{Subject: src.Subject, Data: src.Data, Header: make(nats.Header, len(src.Header)+3)}
		for k, v := range src.Header {
			m.Header[k] = v
		}
		m.Header.Set(headerBatchID, id)
		m.Header.Set(headerBatchSeq, strconv.Itoa(i+1))
		if i < len(msgs)-1 {
			if err := nc.PublishMsg(m); err != nil {
				return batchAck{}, fmt.Errorf("atomic batch message %d of %d: %w", i+1, len(msgs), err)
			}
			continue
		}
		m.Header.Set(headerBatchCommit, "1")
		var err error
		if resp, err = nc.RequestMsgWithContext(ctx, m); err != nil {
			return batchAck{}, err
		}
	}
	var ack batchAck
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return batchAck{}, fmt.Errorf("atomic batch commit reply %q: %w", resp.Data, err)
	}
	if ack.Error != nil {
		return batchAck{}, ack.Error
	}
	if ack.BatchID != id || ack.Count != len(msgs) || ack.Sequence < uint64(len(msgs)) {
		return batchAck{}, fmt.Errorf("atomic batch commit reply %q: not the ack of batch %s of %d messages", resp.Data, id, len(msgs))
	}
	return ack, nil
}

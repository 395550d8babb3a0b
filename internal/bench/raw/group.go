package raw

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// GroupAppender is Appender with the plainest group commit one stream
// allows: the appends that arrive while a write is in flight all go out
// together, as one atomic batch (each message with its own expectation and
// Msg-Id, stored with one fsync), as soon as it returns. A lone append is a
// plain publish. One write is in flight at a time (a stream commits its
// batches one after another), nothing lingers, and nothing is split or
// retried: a refused batch fails every member.
//
// It is what JetStream itself allows batched appends on one stream to
// reach under sync always — the ceiling for esjet's group commit
// (streams.Log), which adds the decision's own work, the relay reading the
// log and the conflict paths. Safe for concurrent use; the stream must
// allow atomic publish.
type GroupAppender struct {
	*Appender
	nc      *nats.Conn
	js      jetstream.JetStream
	timeout time.Duration

	mu      sync.Mutex
	queue   []*groupWrite
	busy    bool
	batches int // atomic batches committed
	batched int // appends stored through them
}

type groupWrite struct {
	msg  *nats.Msg
	seq  uint64
	err  error
	done chan struct{}
}

// NewGroupAppender is NewAppender publishing on js's connection through a group commit;
// timeout bounds one write.
func NewGroupAppender(js jetstream.JetStream, subjects []string, data []byte, header nats.Header, timeout time.Duration) *GroupAppender {
	return &GroupAppender{Appender: NewAppender(subjects, data, header), nc: js.Conn(), js: js, timeout: timeout}
}

// Append appends the message to aggregate a's subject. It waits for its
// write even when ctx ends first: the expectation of a's next append
// depends on it.
func (g *GroupAppender) Append(ctx context.Context, a int) (waited bool, err error) {
	if !g.locks[a].TryLock() {
		waited = true
		g.locks[a].Lock()
	}
	defer g.locks[a].Unlock()
	if err := ctx.Err(); err != nil {
		return waited, err
	}
	m := g.message(a)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(g.last[a], 10))
	w := &groupWrite{msg: m, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, w)
	lead := !g.busy
	g.busy = true
	g.mu.Unlock()
	if lead {
		// Nothing in flight: write what is queued (this append, alone,
		// unless others came meanwhile), then hand the rest on.
		g.round()
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.busy = false
			g.mu.Unlock()
		} else {
			g.mu.Unlock()
			go g.drain()
		}
	}
	<-w.done
	if w.err != nil {
		return waited, w.err
	}
	g.last[a] = w.seq
	return waited, nil
}

// Batches reports the atomic batches committed and the appends stored
// through them.
func (g *GroupAppender) Batches() (batches, batched int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.batches, g.batched
}

// drain writes rounds until the queue is empty.
func (g *GroupAppender) drain() {
	for g.round() {
	}
}

// round writes everything queued (up to JetStream's 1,000 a batch) as one
// write and reports whether there was anything; with nothing queued it
// ends the busy period.
func (g *GroupAppender) round() bool {
	g.mu.Lock()
	n := min(len(g.queue), 1000)
	if n == 0 {
		g.busy = false
		g.mu.Unlock()
		return false
	}
	ws := g.queue[:n:n]
	g.queue = g.queue[n:]
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	if n == 1 {
		ack, err := g.js.PublishMsg(ctx, ws[0].msg)
		if err == nil {
			ws[0].seq = ack.Sequence
		}
		ws[0].err = err
		close(ws[0].done)
		return true
	}
	last, err := g.commit(ctx, ws)
	g.mu.Lock()
	if err == nil {
		g.batches++
		g.batched += n
	}
	g.mu.Unlock()
	for i, w := range ws {
		if err == nil {
			w.seq = last - uint64(n-1-i)
		}
		w.err = err
		close(w.done)
	}
	return true
}

// commit publishes ws as one atomic batch and returns the stream sequence
// of its last message.
func (g *GroupAppender) commit(ctx context.Context, ws []*groupWrite) (uint64, error) {
	id := nuid.Next()
	for i, w := range ws {
		w.msg.Header.Set(wire.HeaderBatchID, id)
		w.msg.Header.Set(wire.HeaderBatchSeq, strconv.Itoa(i+1))
		if i < len(ws)-1 {
			if err := g.nc.PublishMsg(w.msg); err != nil {
				return 0, err
			}
			continue
		}
		w.msg.Header.Set(wire.HeaderBatchCommit, "1")
		resp, err := g.nc.RequestMsgWithContext(ctx, w.msg)
		if err != nil {
			return 0, err
		}
		var ack struct {
			Seq   uint64              `json:"seq"`
			Count int                 `json:"count"`
			Error *jetstream.APIError `json:"error"`
		}
		if err := json.Unmarshal(resp.Data, &ack); err != nil {
			return 0, fmt.Errorf("atomic batch commit reply %q: %w", resp.Data, err)
		}
		if ack.Error != nil {
			return 0, ack.Error
		}
		if ack.Count != len(ws) {
			return 0, fmt.Errorf("atomic batch commit reply %q: want %d messages", resp.Data, len(ws))
		}
		return ack.Seq, nil
	}
	return 0, nil
}

package streams

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// GroupCommit tunes how concurrent appends share one durable write.
//
// On a single server under sync always every JetStream publish is made
// durable on its own (one fsync each, ~5k/s at any concurrency), and the
// only group commit the server offers is an atomic batch: N messages, each
// with its own subject expectation and Msg-Id, stored with one fsync for a
// fixed ~2.3 ms (measured, nats-server 2.12, sync always). So the committer keeps one write in flight: a
// lone append is published at once, as before; the appends that queue
// while a write is in flight go out together when it returns — as one
// atomic batch when at least MinBatch are waiting, else as concurrent plain
// publishes (below ~8 a batch is slower than plain publishes). Under heavy
// load a round may linger briefly for the writers of the last one to come
// back (Linger), so the batches stay large.
//
// On R3 raft already group-commits concurrent publishes, and under sync
// interval nothing is fsynced per message while a batch is still staged
// with fsyncs: leave it off there (the zero value).
type GroupCommit struct {
	// MinBatch is the least number of queued appends committed as one
	// atomic batch. Zero turns group commit off: every append is its own
	// publish.
	MinBatch int
	// MaxBatch caps a batch (JetStream allows 1,000). Zero means 512.
	MaxBatch int
	// Linger is how long, after a round of at least LingerFrom appends,
	// the next round waits for as many appends to queue again (the writers
	// of the last round coming back with their next append): fewer, larger
	// batches under heavy load. Zero: no wait.
	Linger     time.Duration
	LingerFrom int
}

func (g *GroupCommit) setDefaults() {
	if g.MaxBatch == 0 {
		g.MaxBatch = 512
	}
	g.MaxBatch = min(g.MaxBatch, 1000)
}

// committer is the group commit of one Log: appends queue here, one round
// of writes is in flight at a time, and each member gets the outcome of
// its own message as a plain publish would have given it (an ack, 10071
// for its stale expectation, a timeout) so Append resolves it as before.
type committer struct {
	js      jetstream.JetStream
	cfg     GroupCommit
	timeout time.Duration
	// subjectAt names the subject of the message stored at seq: a batch
	// refused with 10071 names the offending subject's last sequence.
	subjectAt func(ctx context.Context, seq uint64) (string, error)
	logger    *slog.Logger
	// afterCommit, set by tests, replaces a batch commit's error (e.g. a
	// reply lost after the batch was stored).
	afterCommit func(error) error

	// reader, when set, serves Committer.Last: reads made while a round
	// is in flight (inFlight) queue in reads until it returns.
	reader *lastReader

	mu       sync.Mutex
	queue    []*pending
	busy     bool
	inFlight bool
	reads    []*lastRead
	last     int           // size of the last round
	wake     chan struct{} // an append queued while a round lingers
	stats    commitStats
}

// pending is one append waiting for its round.
type pending struct {
	msg  *nats.Msg // carries Msg-Id and the subject expectation
	done chan struct{}
	ack  *jetstream.PubAck
	err  error
}

func (p *pending) finish(ack *jetstream.PubAck, err error) {
	p.ack, p.err = ack, err
	close(p.done)
}

// commitStats count what the committer did.
type commitStats struct {
	batches, batched, plain, splits, fallbacks uint64
	readRounds, readsTogether                  uint64
}

func (s commitStats) public() CommitStats {
	return CommitStats{Batches: s.batches, Batched: s.batched, Plain: s.plain, Splits: s.splits, Fallbacks: s.fallbacks,
		ReadRounds: s.readRounds, ReadsTogether: s.readsTogether}
}

// CommitStats is what group commit has done since the log was opened.
type CommitStats struct {
	Batches   uint64 // atomic batches committed
	Batched   uint64 // appends stored through them
	Plain     uint64 // appends published on their own
	Splits    uint64 // batches refused for one stale expectation and recommitted without it
	Fallbacks uint64 // batches whose members were published one by one instead
	// ReadRounds counts the rounds after which the reads made during them
	// (Committer.Last) were served together (one multi_last request per
	// 1,000, more for a cut reply), ReadsTogether those reads.
	ReadRounds, ReadsTogether uint64
}

// GroupCommitting reports whether the log's appends go through a group
// commit.
func (l *Log) GroupCommitting() bool { return l.commit != nil }

// CommitStats reports the log's group commit counters (zero when off).
func (l *Log) CommitStats() CommitStats {
	if l.commit == nil {
		return CommitStats{}
	}
	c := l.commit
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats.public()
}

// publish stores msg (which already carries its Msg-Id and expectation)
// through the group commit and returns what a plain publish would: the
// ack, or the error of its own message. ctx ending while msg waits returns
// ctx's error: msg may still be written, as with a publish in flight.
func (c *committer) publish(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error) {
	// A copy: the caller may retry with msg while this one still waits.
	cp := &nats.Msg{Subject: msg.Subject, Data: msg.Data, Header: make(nats.Header, len(msg.Header))}
	for k, v := range msg.Header {
		cp.Header[k] = v
	}
	p := &pending{msg: cp, done: make(chan struct{})}
	c.mu.Lock()
	c.queue = append(c.queue, p)
	if c.busy {
		c.mu.Unlock()
		if c.cfg.Linger > 0 {
			select {
			case c.wake <- struct{}{}:
			default:
			}
		}
		select {
		case <-p.done:
			return p.ack, p.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// Nothing in flight: this caller writes its own message now, alone,
	// and hands whatever queued meanwhile to a goroutine.
	c.busy = true
	round := c.take()
	c.mu.Unlock()
	c.round(round)
	c.mu.Lock()
	if len(c.queue) == 0 {
		c.busy = false
		c.mu.Unlock()
	} else {
		c.mu.Unlock()
		go c.drain()
	}
	<-p.done
	return p.ack, p.err
}

// take removes up to MaxBatch pending appends from the queue. Holds mu.
func (c *committer) take() []*pending {
	n := min(len(c.queue), c.cfg.MaxBatch)
	round := c.queue[:n:n]
	c.queue = c.queue[n:]
	if len(c.queue) == 0 {
		c.queue = nil
	}
	return round
}

// drain runs rounds until the queue is empty.
func (c *committer) drain() {
	for {
		c.mu.Lock()
		c.linger()
		if len(c.queue) == 0 {
			c.busy = false
			c.mu.Unlock()
			return
		}
		round := c.take()
		c.mu.Unlock()
		c.round(round)
	}
}

// linger waits, after a large round, up to Linger for as many appends as
// it had to queue again. Holds mu (released while waiting).
func (c *committer) linger() {
	if c.cfg.Linger == 0 || c.last < c.cfg.LingerFrom || len(c.queue) >= c.last {
		return
	}
	t := time.NewTimer(c.cfg.Linger)
	defer t.Stop()
	for len(c.queue) < c.last {
		c.mu.Unlock()
		select {
		case <-c.wake:
			c.mu.Lock()
		case <-t.C:
			c.mu.Lock()
			return
		}
	}
}

// round writes its members: as one atomic batch when there are enough,
// else as concurrent plain publishes, and finishes every member.
// The reads made meanwhile are served when it returns, before the next
// round.
func (c *committer) round(members []*pending) {
	c.mu.Lock()
	c.last = len(members)
	c.inFlight = true
	c.mu.Unlock()
	if len(members) >= max(c.cfg.MinBatch, 2) {
		c.batch(members)
	} else {
		c.plain(members)
	}
	c.mu.Lock()
	c.inFlight = false
	reads := c.reads
	c.reads = nil
	c.mu.Unlock()
	if len(reads) > 0 {
		c.count(func(s *commitStats) { s.readRounds++; s.readsTogether += uint64(len(reads)) })
		c.reader.serve(reads)
	}
}

// lastMsg reads the last message on subject: now when no round is in
// flight, else together with the other reads made meanwhile when it
// returns.
func (c *committer) lastMsg(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	if c.reader == nil {
		return nil, errors.New("streams: this committer does not read")
	}
	c.mu.Lock()
	if !c.inFlight {
		c.mu.Unlock()
		return c.reader.one(ctx, subject)
	}
	rd := &lastRead{subject: subject, done: make(chan struct{})}
	c.reads = append(c.reads, rd)
	c.mu.Unlock()
	select {
	case <-rd.done:
		return rd.msg, rd.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// plain publishes each member on its own, concurrently.
func (c *committer) plain(members []*pending) {
	c.mu.Lock()
	c.stats.plain += uint64(len(members))
	c.mu.Unlock()
	if len(members) == 1 {
		c.publishOne(members[0])
		return
	}
	var wg sync.WaitGroup
	for _, p := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.publishOne(p)
		}()
	}
	wg.Wait()
}

func (c *committer) publishOne(p *pending) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	// The message's headers hold its expectation and Msg-Id already.
	p.finish(c.js.PublishMsg(ctx, p.msg))
}

// Committer is group commit for the writers of any one stream: the
// receipts bucket's workers, for one. Its zero value and a nil *Committer
// are off (Publish then publishes each message on its own).
type Committer struct {
	c      *committer
	js     jetstream.JetStream
	stream string
}

// NewCommitter returns the group commit of stream's writers on js; with
// cfg.MinBatch zero, a Committer that publishes each message on its own.
// timeout bounds one write. logger may be nil.
func NewCommitter(js jetstream.JetStream, stream string, cfg GroupCommit, timeout time.Duration, logger *slog.Logger) *Committer {
	cfg.setDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MinBatch == 0 {
		return &Committer{js: js, stream: stream}
	}
	return &Committer{js: js, stream: stream, c: &committer{js: js, reader: newLastReader(js, stream, timeout), cfg: cfg, timeout: timeout, wake: make(chan struct{}, 1), logger: logger.With("component", "streams", "stream", stream),
		subjectAt: func(ctx context.Context, seq uint64) (string, error) {
			st, err := js.Stream(ctx, stream)
			if err != nil {
				return "", err
			}
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				return "", err
			}
			return m.Subject, nil
		}}}
}

// Publish stores msg, which carries its own expectation headers, and
// returns what a plain publish of it would: its ack, or its own error
// (10071 for its stale expectation).
func (c *Committer) Publish(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error) {
	if c == nil || c.c == nil {
		return c.js.PublishMsg(ctx, msg)
	}
	return c.c.publish(ctx, msg)
}

// Stream names the stream the committer writes (and reads).
func (c *Committer) Stream() string {
	if c == nil {
		return ""
	}
	return c.stream
}

// Batching reports whether the committer group-commits (and batches
// [Committer.Last]).
func (c *Committer) Batching() bool { return c != nil && c.c != nil }

// Last reads the last message on subject of the committer's stream (a
// direct get, as kv.Get's), or returns jetstream.ErrMsgNotFound. A read
// made while a round of writes is in flight, which it would wait behind
// anyway, goes out when the round returns, together with the others made
// meanwhile, as one request: the writers of a stream often read it first
// (a worker its command's receipt). Only for a committer that is on: see
// [Committer.Batching].
func (c *Committer) Last(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	if !c.Batching() {
		return nil, errors.New("streams: Committer.Last on a committer that is off")
	}
	return c.c.lastMsg(ctx, subject)
}

// Stats reports what the committer has done (zero when off).
func (c *Committer) Stats() CommitStats {
	if c == nil || c.c == nil {
		return CommitStats{}
	}
	c.c.mu.Lock()
	defer c.c.mu.Unlock()
	return c.c.stats.public()
}

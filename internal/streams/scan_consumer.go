package streams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Reading a long range through a consumer.
//
// A batched direct get is one round trip per batch, served while the
// reader waits, and the server writes six headers into every message it
// returns (stream, subject, sequence, time, pending, last) through
// net/http's header writer: at a million decisions that was a sixth of a
// full reconcile's CPU and most of its garbage, which under memory.limit
// keeps the collector running. An ordered consumer streams the messages
// with their own headers only (the metadata rides in the reply subject)
// while the reader works on the ones before: 2–4× the messages per second
// on the same store. It needs the right to create consumers on the stream,
// which the operator role does not have ([ConsumersAllowed]); direct gets
// stay the way for the rest.

// rangeMaxBytes bounds what a [ReadRange] asks for at a time, as
// batchMaxBytes bounds a batched direct get: a batch of big messages must
// not fill the reader's memory.
const rangeMaxBytes = 8 << 20

// pullHeartbeat is how often the server tells a [ReadRange] that its pull
// is waiting with nothing to send (nats.go's least). It is what brings back
// a pull lost on a cluster. The ordered consumer is R1 (no raft election):
// its server subscribes to $JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>
// and then answers the create. That interest travels to the client's
// server on the account's route connection, the answer on the system
// account's (route pooling hashes each account onto one of 3), so the
// answer can arrive first, and a pull sent at once finds no interest
// there. It is dropped without a reply: the account's $JS.API.> import
// takes it and ignores MSG.NEXT, so no 503 either. nats.go counts the
// batch as pending and never pulls again. About 2% of reads from a client
// on another server than the consumer's; none with pooling off
// (TestReadRangeR3ReadsEveryRangeThroughItsConsumer). Two missed
// heartbeats make the ordered consumer start over on a new consumer from
// where it was, which pulls again: a lost pull costs about a second.
const pullHeartbeat = 500 * time.Millisecond

// consumeIdle is how long a [ReadRange] waits for the next message before
// it asks the server whether any is still coming: longer than the two
// missed heartbeats (pullHeartbeat) after which nats.go's Consume pulls
// again, so a lost pull is made good before the read looks. (With the
// default 5 s heartbeat and a 1 s wait, a lost pull was never noticed
// and the read sat until the consumer went inactive.)
const consumeIdle = 4 * pullHeartbeat

// ReadRange calls fn for each stored message of stream over [r.From, r.To]
// (both required; r.Since is not used), in stream order, through an
// ephemeral ordered consumer, and returns how many it passed to fn. fn may
// return [ErrStopScan] to end early. The consumer is deleted before it
// returns. batch is how many messages the client asks for at a time (≤ 0:
// 1000). Where the consumer ends before r.To (placed on a replica that is
// behind), the rest is read as a [Scanner] reads it, the leader answering
// what the replicas do not have.
func ReadRange(ctx context.Context, js jetstream.JetStream, stream string, r ScanRange, batch int, fn func(*jetstream.RawStreamMsg) error) (int, error) {
	var last uint64
	stopped := false
	n, err := readRange(ctx, js, stream, r, batch, func(m *jetstream.RawStreamMsg) error {
		last = m.Sequence
		err := fn(m)
		stopped = errors.Is(err, ErrStopScan)
		return err
	})
	if err != nil || stopped || r.To < r.From || last >= r.To {
		return n, err
	}
	sc := NewScanner(js, stream, batch)
	defer sc.Close()
	rest := r
	rest.From = max(r.From, last+1)
	more, err := sc.Scan(ctx, rest, fn)
	return n + more, err
}

func readRange(ctx context.Context, js jetstream.JetStream, stream string, r ScanRange, batch int, fn func(*jetstream.RawStreamMsg) error) (int, error) {
	if r.From == 0 || r.To == 0 {
		return 0, fmt.Errorf("read %s: a range needs its first and last sequence (from %d, to %d)", stream, r.From, r.To)
	}
	if r.To < r.From {
		return 0, nil
	}
	if batch <= 0 {
		batch = 1000
	}
	cfg := jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: r.From,
		InactiveThreshold: 30 * time.Second, MaxResetAttempts: 5,
	}
	if r.Filter != "" && r.Filter != ">" {
		cfg.FilterSubjects = []string{r.Filter}
	}
	oc, err := js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", stream, err)
	}
	// Consume, not Messages: every pull that asks for a batch and a byte
	// limit ends with a status ("409 Batch Completed") once its batch is
	// sent, and Messages' buffer holds one batch of messages and nothing
	// more. A caller a batch behind the server had those statuses dropped
	// as a slow consumer on the connection (the bench's replay printed
	// it); with two statuses waiting in the buffer, a message would have
	// gone instead, and the ordered consumer started over. Consume's
	// subscription queues what has come until the handler takes it, and
	// asks for more only as the handler returns: what waits is bounded by
	// the pulls, a batch and rangeMaxBytes each.
	in := make(chan jetstream.Msg)
	done := make(chan struct{})
	var consumeErr atomic.Pointer[error] // the last error the consumer reported, for an idle read's error
	cc, err := oc.Consume(func(m jetstream.Msg) {
		select {
		case in <- m:
		case <-done: // the read is over
		}
	}, jetstream.PullMaxMessagesWithBytesLimit(batch, rangeMaxBytes), jetstream.PullHeartbeat(pullHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { consumeErr.Store(&err) }))
	if err != nil {
		return 0, fmt.Errorf("read %s from seq %d: %w", stream, r.From, err)
	}
	defer func() {
		close(done)
		cc.Stop()
		if info := oc.CachedInfo(); info != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = js.DeleteConsumer(dctx, stream, info.Name) // else it goes after InactiveThreshold
			cancel()
		}
	}()
	if info := oc.CachedInfo(); info != nil && info.NumPending == 0 {
		return 0, nil // nothing stored from r.From on
	}
	idle := time.NewTimer(consumeIdle)
	defer idle.Stop()
	n, last, stuck := 0, uint64(0), 0
	for {
		var m jetstream.Msg
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case m = <-in:
			idle.Reset(consumeIdle)
			stuck = 0 // "twice" is in a row: the pulls work again
		case <-idle.C:
			idle.Reset(consumeIdle)
			// Nothing came for a while: the rest of the range may have
			// been deleted (or aged out) since the consumer counted it.
			info, err := oc.Info(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return n, ctx.Err()
				}
				if cerr := consumeErr.Load(); cerr != nil {
					err = fmt.Errorf("%w (the consumer reported: %w)", err, *cerr)
				}
				return n, fmt.Errorf("read %s after seq %d: %w", stream, last, err)
			}
			if info.NumPending == 0 && info.Delivered.Stream <= max(last, r.From-1) {
				return n, nil
			}
			// Messages pending and no pull waiting at the consumer, twice:
			// a pull that never reached it (pullHeartbeat) and was not
			// made good by the ordered consumer starting over. No pull
			// follows before the consumer goes inactive (30 s, then
			// "consumer not found"), so the rest is read with direct gets
			// (ReadRange): a safety net, not the way.
			if info.NumWaiting == 0 {
				if stuck++; stuck >= 2 {
					return n, nil
				}
			}
			continue
		}
		if ctx.Err() != nil {
			return n, ctx.Err()
		}
		meta, err := m.Metadata()
		if err != nil {
			return n, fmt.Errorf("read %s after seq %d: %w", stream, last, err)
		}
		seq := meta.Sequence.Stream
		if seq > r.To {
			return n, nil
		}
		last = seq
		n++
		raw := &jetstream.RawStreamMsg{Subject: m.Subject(), Sequence: seq, Header: m.Headers(), Data: m.Data(), Time: meta.Timestamp.UTC()} // UTC, as a direct get's
		if err := fn(raw); err != nil {
			if errors.Is(err, ErrStopScan) {
				return n, nil
			}
			return n, err
		}
		if seq >= r.To || meta.NumPending == 0 {
			return n, nil
		}
	}
}

// userInfoSubject is where a connection asks the server who it is and with
// which permissions.
const userInfoSubject = "$SYS.REQ.USER.INFO"

// ConsumersAllowed says whether js's connection may read the named streams
// through consumers of its own ([ReadRange]): true when the server reports
// no publish permissions for it, or ones that allow creating, pulling
// from and deleting a consumer on each stream. Anything else — an API
// prefix or domain, a server that does not answer — is false: direct gets,
// which every reader may use, stay the way.
func ConsumersAllowed(ctx context.Context, js jetstream.JetStream, streams ...string) bool {
	if o := js.Options(); o.APIPrefix != "" || o.Domain != "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second) // a user who may not ask waits this long
	defer cancel()
	m, err := js.Conn().RequestWithContext(ctx, userInfoSubject, nil)
	if err != nil {
		return false
	}
	var resp struct {
		Data *struct {
			Permissions *struct {
				Publish *struct {
					Allow []string `json:"allow"`
					Deny  []string `json:"deny"`
				} `json:"publish"`
			} `json:"permissions"`
		} `json:"data"`
	}
	if json.Unmarshal(m.Data, &resp) != nil || resp.Data == nil {
		return false
	}
	if resp.Data.Permissions == nil || resp.Data.Permissions.Publish == nil {
		return true
	}
	pub := resp.Data.Permissions.Publish
	allowed := func(subject string) bool {
		ok := len(pub.Allow) == 0
		for _, a := range pub.Allow {
			ok = ok || SubjectMatches(a, subject)
		}
		for _, d := range pub.Deny {
			ok = ok && !SubjectMatches(d, subject)
		}
		return ok
	}
	for _, s := range streams {
		for _, api := range []string{"CREATE." + s + ".c.f", "CREATE." + s + ".c", "MSG.NEXT." + s + ".c", "DELETE." + s + ".c", "INFO." + s + ".c"} {
			if !allowed("$JS.API.CONSUMER." + api) {
				return false
			}
		}
	}
	return true
}

// SubjectMatches says whether subject matches pattern (* one token, > the
// rest), token by token without allocating: the API's reply guard asks it
// on every request.
func SubjectMatches(pattern, subject string) bool {
	for {
		p, prest, pmore := strings.Cut(pattern, ".")
		if p == ">" {
			return subject != ""
		}
		s, srest, smore := strings.Cut(subject, ".")
		if subject == "" || (p != "*" && p != s) {
			return false
		}
		if !pmore || !smore {
			return pmore == smore
		}
		pattern, subject = prest, srest
	}
}

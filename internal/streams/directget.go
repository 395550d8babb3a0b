package streams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// batchGetter does batched direct gets ($JS.API.DIRECT.GET.<stream>, 2.11+)
// over ONE long-lived reply subscription, routing each reply to its request
// by the last token of the reply subject. A helper that subscribes per
// request (SUB + UNSUB and a 64Ki-slot channel each time) made a 10-message
// load cost about 1 ms and 700 KB; sharing the subscription removes that.
type batchGetter struct {
	nc      *nats.Conn
	api     string // $JS.API. (or the domain's, the prefix's)
	stream  string
	subject string // $JS.API.DIRECT.GET.<stream>
	inbox   string // <inbox prefix>.
	once    sync.Once
	sub     *nats.Subscription
	subErr  error
	next    atomic.Uint64
	read    atomic.Uint64 // messages received, for tests that count a read's cost
	try     time.Duration // getTry; tests shorten it
	mu      sync.Mutex
	waiting map[string]*waiter
}

// waiter is one get's: the channel its replies go to, and which of its
// tries is answering (set by the router: the first try whose reply comes;
// the other tries' replies are dropped, so ch never holds two batches).
type waiter struct {
	ch        chan *nats.Msg
	answering string
}

func newBatchGetter(js jetstream.JetStream, stream string) *batchGetter {
	prefix := "$JS.API."
	if o := js.Options(); o.APIPrefix != "" {
		prefix = strings.TrimSuffix(o.APIPrefix, ".") + "."
	} else if o.Domain != "" {
		prefix = "$JS." + o.Domain + ".API."
	}
	nc := js.Conn()
	return &batchGetter{
		nc:      nc,
		api:     prefix,
		stream:  stream,
		subject: prefix + "DIRECT.GET." + stream,
		inbox:   nc.NewInbox() + "." + nuid.Next() + ".",
		try:     getTry,
		waiting: map[string]*waiter{},
	}
}

func (g *batchGetter) subscribe() error {
	g.once.Do(func() {
		g.sub, g.subErr = g.nc.Subscribe(g.inbox+"*", func(m *nats.Msg) {
			token := m.Subject[len(g.inbox):]
			g.mu.Lock()
			w := g.waiting[token]
			g.mu.Unlock()
			if w == nil {
				return
			}
			// Only this callback (one at a time) reads and sets answering.
			if w.answering == "" {
				w.answering = token
			} else if w.answering != token {
				return // another try of the same get answered first
			}
			select {
			case w.ch <- m:
			default: // more replies than asked for: cannot happen; never block the router
			}
		})
		if g.subErr == nil {
			g.subErr = g.sub.SetPendingLimits(-1, -1)
		}
	})
	return g.subErr
}

// batchRequest is the direct get request body (JSApiMsgGetRequest). Batch 0
// asks for one message ([batchGetter.one]): the server then reads just
// that message, where a batch first counts what matches after Seq — for a
// subject filter starting mid-stream, a walk over the per-block subject
// index of every block between the subject's first message and Seq (or
// its last), each loaded from disk when cold.
type batchRequest struct {
	Seq       uint64     `json:"seq,omitempty"`
	LastFor   string     `json:"last_by_subj,omitempty"`
	NextFor   string     `json:"next_by_subj,omitempty"`
	MultiLast []string   `json:"multi_last,omitempty"` // the last message of each (lastReader)
	Batch     int        `json:"batch,omitempty"`
	MaxBytes  int        `json:"max_bytes,omitempty"`
	StartTime *time.Time `json:"start_time,omitempty"`
}

// batchMaxBytes caps one batch's payload. The server ends a batch early at
// this size (or at its max_pending, 64 MiB by default, which could also
// overrun a client's buffers); the reader then continues from where the
// batch stopped, while the last message's Nats-Num-Pending says more match.
const batchMaxBytes = 1 << 20

// getTry is how long a batched direct get waits for its first reply before
// it sends the request again (a read: safe to repeat). Any replica in sync
// answers direct gets, as a queue group; a replica that is frozen (a
// stopped process, a VM pause, a partition that keeps TCP up) stays in
// that group on the other servers until their route to it times out,
// minutes later, and a request it draws waits for nothing. The next try
// most likely draws another member. Each wait doubles the last, and a
// reply to any of the tries is taken: a server that is only slow (a batch
// that walks a large store's blocks can take seconds on a loaded machine,
// and a connection's requests are served one after another) answers the
// first try, which a later one must not discard — resending every 2 s
// while dropping the earlier tries' replies never finished a 2.5 s walk.
const (
	getTry    = 2 * time.Second
	getResend = 4 // at most this many tries after the first
)

// errNoMessages is the server's 404: nothing matches.
var errNoMessages = errors.New("no messages")

// notFound is a 404 before any message: errors.Is(err, errNoMessages),
// with the server's description, which tells "No Results" (nothing
// matches) from "Message Not Found" (a message that matches could not be
// loaded).
type notFound struct{ description string }

func (e *notFound) Error() string        { return "no messages: " + e.description }
func (e *notFound) Is(target error) bool { return target == errNoMessages }

// noResults reports a 404 that says nothing matches at all.
func noResults(err error) bool {
	var nf *notFound
	return errors.As(err, &nf) && nf.description == "No Results"
}

// get sends one batch request and calls fn for each message in order. It
// returns the last message's Nats-Num-Pending (how many more match) and
// how many messages came.
func (g *batchGetter) get(ctx context.Context, req batchRequest, fn func(*jetstream.RawStreamMsg) error) (got int, pending uint64, err error) {
	if err := g.subscribe(); err != nil {
		return 0, 0, fmt.Errorf("direct get: subscribe: %w", err)
	}
	if req.MaxBytes == 0 {
		req.MaxBytes = batchMaxBytes
	}
	body, err := json.Marshal(req)
	if err != nil {
		return 0, 0, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	// Every try's replies go to w; the router passes on the first try's
	// to answer and drops the others'.
	w := &waiter{ch: make(chan *nats.Msg, req.Batch+2)} // the batch, the end-of-batch marker, slack
	var tokens []string
	defer func() {
		g.mu.Lock()
		for _, t := range tokens {
			delete(g.waiting, t) // a late reply to it is dropped
		}
		g.mu.Unlock()
	}()
	send := func() error {
		token := strconv.FormatUint(g.next.Add(1), 36)
		tokens = append(tokens, token)
		g.mu.Lock()
		g.waiting[token] = w
		g.mu.Unlock()
		if err := g.nc.PublishRequest(g.subject, g.inbox+token, body); err != nil {
			return fmt.Errorf("direct get: %w", err)
		}
		return nil
	}
	if err := send(); err != nil {
		return 0, 0, err
	}
	// Until the first reply, the request is sent again after getTry, then
	// after twice as long, getResend times at most.
	wait := g.try
	resend := time.NewTimer(wait)
	answered := false
	defer resend.Stop()
	for {
		select {
		case <-ctx.Done():
			return got, pending, fmt.Errorf("direct get from %s: %w", g.subject, ctx.Err())
		case <-resend.C:
			if answered {
				continue
			}
			if err := send(); err != nil {
				return 0, 0, err
			}
			if len(tokens) <= getResend {
				wait *= 2
				resend.Reset(wait)
			}
		case m := <-w.ch:
			if !answered {
				answered = true
				resend.Stop()
			}
			if len(m.Data) == 0 && m.Header != nil {
				switch m.Header.Get("Status") {
				case "204": // end of batch
					return got, pending, nil
				case "404":
					if got == 0 {
						return 0, 0, &notFound{description: m.Header.Get("Description")}
					}
					return got, pending, nil
				case "":
				default:
					return got, pending, fmt.Errorf("direct get from %s: status %s %s", g.subject, m.Header.Get("Status"), m.Header.Get("Description"))
				}
			}
			raw, err := rawMsg(m)
			if err != nil {
				return got, pending, err
			}
			got++
			g.read.Add(1)
			pending, _ = strconv.ParseUint(m.Header.Get(wire.HeaderNumPending), 10, 64)
			if err := fn(raw); err != nil {
				return got, pending, err
			}
		}
	}
}

// one gets a single message: the one at req.Seq, the first on req.NextFor
// at or after req.Seq, or the last on req.LastFor. It returns
// [errNoMessages] when there is none.
func (g *batchGetter) one(ctx context.Context, req batchRequest) (*jetstream.RawStreamMsg, error) {
	req.Batch = 0
	var out *jetstream.RawStreamMsg
	_, _, err := g.get(ctx, req, func(m *jetstream.RawStreamMsg) error {
		out = m
		return errStop
	})
	switch {
	case out != nil:
		return out, nil
	case err == nil:
		return nil, errNoMessages
	default:
		return nil, err
	}
}

// rawMsg turns a direct get reply into the stored message it carries.
func rawMsg(m *nats.Msg) (*jetstream.RawStreamMsg, error) {
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("direct get: bad %s header %q", jetstream.SequenceHeader, m.Header.Get(jetstream.SequenceHeader))
	}
	ts, err := time.Parse(time.RFC3339Nano, m.Header.Get(jetstream.TimeStampHeaer))
	if err != nil {
		return nil, fmt.Errorf("direct get: bad timestamp: %w", err)
	}
	return &jetstream.RawStreamMsg{
		Subject: m.Header.Get(jetstream.SubjectHeader), Sequence: seq, Header: m.Header, Data: m.Data, Time: ts,
	}, nil
}

package streams

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/wire"
)

// Upcaster turns an event of an older schema into the current shape. It is
// called for every event read and returns the event unchanged when there is
// nothing to do. It must be pure: replay calls it again and again.
type Upcaster func(aggregateType string, e Event) (Event, error)

// Config tunes a [Log]. The zero value of every field means its default.
type Config struct {
	// MaxMessageSize caps an encoded decision (headers + payload). Zero
	// means 1 MiB. Keep it ≤ the stream's max_msg_size.
	MaxMessageSize int
	// AppendTimeout bounds the first publish attempt; the attempts after
	// one timed out are bounded by 2s (or AppendTimeout if shorter), so
	// that a new stream leader is found soon after its election (see
	// Append). Zero means 5s.
	AppendTimeout time.Duration
	// AppendAttempts is how many tries a publish gets (same Msg-Id, same
	// expectation) before the outcome is reported unknown; tries that time
	// out go on, shorter, for as long as AppendAttempts × AppendTimeout.
	// Zero means 3.
	AppendAttempts int
	// LoadBatch is how many messages one batched direct get asks for. Zero
	// means 1000.
	LoadBatch int
	// MaxDelay bounds a command's deliver-after: OUTBOX keeps a delayed
	// command's schedule only for its max age, so a later one would be
	// lost. Zero means no bound (set it to the outbox max age).
	MaxDelay time.Duration
	// Upcast, when set, is applied to every event read.
	Upcast Upcaster
	// Open, when set, runs on every record read before Upcast: the node
	// opens sealed personal fields of events and commands with it
	// (internal/shred).
	Open func(*Record) error
	// Now is the clock for event times. Nil means time.Now.
	Now func() time.Time
	// GroupCommit coalesces concurrent appends into atomic batches; the
	// zero value (off) publishes each append on its own.
	GroupCommit GroupCommit
}

func (c *Config) setDefaults() {
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = 1 << 20
	}
	if c.AppendTimeout == 0 {
		c.AppendTimeout = 5 * time.Second
	}
	if c.AppendAttempts == 0 {
		c.AppendAttempts = 3
	}
	if c.LoadBatch == 0 {
		c.LoadBatch = 1000
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.GroupCommit.setDefaults()
}

// Log appends decisions to and reads them from one namespace's event stream.
// It is safe for concurrent use.
type Log struct {
	js     jetstream.JetStream
	names  Names
	cfg    Config
	logger *slog.Logger
	events jetstream.Stream
	getter *batchGetter
	// leader reads through the stream leader ($JS.API.STREAM.MSG.GET), not
	// a direct get any replica may answer: for the reads that decide an
	// append's outcome or a conflict's actual position.
	leader nats.JetStreamContext
	// foreign: the foreign messages met and logged (foreign.go).
	foreign foreignSeen
	// refused: the messages too new to read, met and logged (refused.go).
	refused refusedSeen
	// commit is the group commit (groupcommit.go); nil when off.
	commit *committer
	// archive reads archived history (SetArchive); archiveReads counts
	// the reads that used it.
	archive      atomic.Pointer[ArchiveReader]
	archiveReads atomic.Int64
	// idSpace is the namespace the log's decision ids are made in
	// (wire.IDSpace of EVENTS' metadata).
	idSpace string
	// consumers: whether the connection may read EVENTS through consumers
	// of its own (longRead), asked once.
	consumers struct {
		once    sync.Once
		allowed bool
		reads   atomic.Int64 // the reads that went through one
	}
}

// Open returns the Log of namespace ns. The streams must exist (see
// [Provision]). logger may be nil.
func Open(ctx context.Context, js jetstream.JetStream, ns string, cfg Config, logger *slog.Logger) (*Log, error) {
	cfg.setDefaults()
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	names := NamesFor(ns)
	st, err := js.Stream(ctx, names.Events)
	if err != nil {
		return nil, fmt.Errorf("open event log %s: %w", names.Events, err)
	}
	if !st.CachedInfo().Config.AllowDirect {
		return nil, fmt.Errorf("open event log %s: direct get is disabled on the stream; run the node once to provision it", names.Events)
	}
	var lopts []nats.JSOpt
	if o := js.Options(); o.APIPrefix != "" {
		lopts = append(lopts, nats.APIPrefix(o.APIPrefix))
	} else if o.Domain != "" {
		lopts = append(lopts, nats.Domain(o.Domain))
	}
	leader, err := js.Conn().JetStream(lopts...)
	if err != nil {
		return nil, fmt.Errorf("open event log %s: %w", names.Events, err)
	}
	l := &Log{
		leader:  leader,
		js:      js,
		names:   names,
		cfg:     cfg,
		logger:  logger.With("component", "streams", "stream", names.Events),
		events:  st,
		getter:  newBatchGetter(js, names.Events),
		idSpace: wire.IDSpace(st.CachedInfo().Config.Metadata, ns),
	}
	if cfg.GroupCommit.MinBatch > 0 {
		l.commit = &committer{js: js, cfg: cfg.GroupCommit, timeout: cfg.AppendTimeout, wake: make(chan struct{}, 1), logger: l.logger,
			subjectAt: func(ctx context.Context, seq uint64) (string, error) {
				m, err := l.leaderGet(ctx, seq, "")
				if err != nil {
					return "", err
				}
				return m.Subject, nil
			}}
	}
	return l, nil
}

// Names returns the JetStream names of the log's namespace.
func (l *Log) Names() Names { return l.names }

// Upcast brings e, an event of aggregate type typ, to its current shape as
// every read of the log does ([Config].Upcast; e as it is when none is
// set). A writer calls it to refuse an event no read could decode.
func (l *Log) Upcast(typ string, e Event) (Event, error) {
	if l.cfg.Upcast == nil {
		return e, nil
	}
	return l.cfg.Upcast(typ, e)
}

// IDSpace is the namespace the log's decision ids are made in: its own,
// or the one it was restored from under another name ([wire.MetaIDSpace]).
func (l *Log) IDSpace() string { return l.idSpace }

// IDSpaceOf is [Log.IDSpace] of namespace ns, read from its EVENTS stream.
func IDSpaceOf(ctx context.Context, js jetstream.JetStream, ns string) (string, error) {
	st, err := js.Stream(ctx, NamesFor(ns).Events)
	if err != nil {
		return "", fmt.Errorf("event log %s: %w", NamesFor(ns).Events, err)
	}
	return wire.IDSpace(st.CachedInfo().Config.Metadata, ns), nil
}

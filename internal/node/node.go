package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/esjet/esjet/config"
	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/archive"
	"github.com/esjet/esjet/internal/broker"
	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/outbox"
	"github.com/esjet/esjet/internal/projection"
	"github.com/esjet/esjet/internal/shred"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/telemetry"
)

// Options are a node's collaborators beside its configuration.
type Options struct {
	// Logger receives the node's logs; nil discards them.
	Logger *slog.Logger
	// Aggregates are the aggregate types the node serves.
	Aggregates []*aggregate.Definition
	// Version is reported by the micro service (semver); "" means 0.0.0.
	Version string
	// Handlers are Go handlers by command kind: a kind with target "go" in
	// the config, or any kind here without a workers entry.
	Handlers map[string]consumer.Handler
	// SpanProcessor, if set, receives every span the node makes, besides
	// the exporter the OTEL_* environment names (tests: an in-memory one).
	SpanProcessor sdktrace.SpanProcessor
	// Projections are the read models the node runs (projections.go).
	Projections []projection.Definition
	// OwnsProcess says the node is the program (the esjet binary, esjet
	// bench): memory.limit then becomes the process's soft memory limit. A
	// node embedded in another Go program leaves the runtime's limit to that
	// program (GOMEMLIMIT or debug.SetMemoryLimit): it is process-wide, and
	// a limit below the host's own heap would make its collector run
	// without pause.
	OwnsProcess bool
}

// Node is a running esjet node. Its methods are safe for concurrent use.
type Node struct {
	cfg    config.Config
	logger *slog.Logger
	broker *broker.Broker
	log    *streams.Log
	keys   *shred.Lazy // personal data's keyring (personal.go)
	// personalViews are the views a forget resets (personal.go).
	personalViews []string
	changes       []streams.Change
	// receipts group-commits the workers' receipt writes (groupcommit.go).
	receipts *streams.Committer
	repo     *aggregate.Repository
	api      *api.Service
	micro    *api.MicroService
	relay    *outbox.Relay

	relayStop context.CancelFunc
	relayDone chan error

	views           *projection.Views
	projectionsStop context.CancelFunc
	projectionsDone chan error

	// control is the fleet's flow control of the workers: pauses, rate
	// limits (KV <ns>_workers).
	control     *consumer.Control
	waiting     waitingCache // readiness's count of commands waiting for a newer worker
	workers     []*consumer.Worker
	workersStop context.CancelFunc
	workersDone sync.WaitGroup

	tel         *telemetry.Telemetry
	metricsSrv  *http.Server
	metricsAddr string

	httpLn       net.Listener // bound first thing in Start (listenHTTP)
	httpSrv      *http.Server
	httpAddr     string
	httpDone     chan error
	httpInFlight atomic.Int64

	// archiving runs the periodic archive passes (archive.go); nil
	// without archive.every.
	archiving     *archive.Schedule
	archivingStop context.CancelFunc
	archivingDone chan error

	health health       // components that stopped on their own (health.go)
	sites  *siteMonitor // the hub's view of its sites (edge.go); nil elsewhere

	closeOnce sync.Once
	closeErr  error
	onClose   []func()
}

// OnClose registers fn to run when the node closes, after the API and the
// workers have stopped and before the relay and the connection do (last
// registered, first run): for things started on the node's connection, such
// as in-process services, which must stop before it drains.
func (n *Node) OnClose(fn func()) { n.onClose = append(n.onClose, fn) }

// Start brings a node up and returns when it is ready: JetStream answers,
// the streams and buckets match cfg, and the HTTP listener (if any) accepts.
// cfg must be valid. The caller must Close the node.
func Start(ctx context.Context, cfg config.Config, opts Options) (_ *Node, err error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{cfg: cfg, logger: logger.With("component", "node")}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = n.Close(cctx)
		}
	}()

	if cfg.HTTP.Listen != config.ListenNone {
		if err := n.listenHTTP(); err != nil {
			return nil, err
		}
	}
	if opts.OwnsProcess {
		_, stopGovernor := applyMemoryLimit(cfg.Memory, n.logger)
		n.onClose = append(n.onClose, stopGovernor)
	}
	if err := n.startTelemetry(ctx, opts); err != nil {
		return nil, err
	}
	n.broker, err = broker.Start(ctx, cfg, logger, broker.WithViews(viewNames(opts.Projections)...))
	if err != nil {
		return nil, err
	}
	cfg = ResolveReplicas(cfg, n.broker.Conn(), n.logger)
	n.cfg = cfg
	n.changes, err = provision(ctx, n.broker.JetStream(), cfg, logger)
	if err != nil {
		return nil, fmt.Errorf("provision namespace %s: %w", cfg.Namespace, err)
	}
	js := n.broker.JetStream()
	n.receipts = receiptCommitter(cfg, js, logger)
	reg, err := aggregate.NewRegistry(opts.Aggregates...)
	if err != nil {
		return nil, err
	}
	n.startKeys(ctx, cfg)
	n.personalViews = personalViews(opts.Projections)
	lc := LogConfig(cfg)
	if lc.Upcast, err = n.upcasters(cfg, reg); err != nil {
		return nil, err
	}
	lc.Open = opening(n.keys, cfg)
	n.log, err = streams.Open(ctx, js, cfg.Namespace, lc, logger)
	if err != nil {
		return nil, err
	}
	snaps, err := streams.BindBucket(ctx, js, streams.NamesFor(cfg.Namespace).Snapshots)
	if err != nil {
		return nil, fmt.Errorf("open snapshots bucket: %w", err)
	}
	rc := RepositoryConfig(cfg)
	rc.Telemetry = n.tel
	rc.Sealer, rc.Personal, rc.PlainKinds = &shred.Sealer{Keys: n.keys}, personalSpecs(cfg), plainKinds(cfg)
	n.repo = aggregate.NewRepository(n.log, snaps, reg, rc, logger)
	applyArchive(cfg, js, reg, n.log)
	n.views = projection.NewViews(js, cfg.Namespace, cfg.Projections.LeaseTTL.Std())
	n.control, err = consumer.OpenControl(ctx, js, cfg.Namespace, logger)
	if err != nil {
		return nil, err
	}
	n.api, err = api.New(n.repo, api.Config{Namespace: cfg.Namespace, MaxBody: int(cfg.Streams.MaxMessageSize),
		Ops: opsHandler(ctx, n.broker.Conn(), js, cfg.Namespace, cfg.Streams.DLQSettledMaxAge.Std(), logger, n.workersAction, n.personalAction), Telemetry: n.tel, Views: n.views,
		GuardedReplies: broker.NodeSpec(cfg).Targets}, logger)
	if err != nil {
		return nil, err
	}
	version := opts.Version
	if version == "" {
		version = "0.0.0"
	}
	n.micro, err = n.api.StartMicro(n.broker.Conn(), version)
	if err != nil {
		return nil, err
	}
	if runsRelay(cfg) {
		relayCfg := RelayConfig(cfg)
		relayCfg.Telemetry = n.tel
		n.relay, err = outbox.NewRelay(ctx, js, cfg.Namespace, relayCfg, logger)
		if err != nil {
			return nil, err
		}
		rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		n.relayStop, n.relayDone = stop, make(chan error, 1)
		go func() { n.relayDone <- n.watch(rctx, "relay", n.relay.Run(rctx)) }()
	}
	if err := n.startWorkers(ctx, opts, logger); err != nil {
		return nil, err
	}
	n.startEdge(ctx)
	if err := n.startProjections(ctx, opts, logger); err != nil {
		return nil, err
	}
	if err := n.startArchiving(ctx, opts.Aggregates, logger); err != nil {
		return nil, err
	}
	if err := n.watchTelemetry(); err != nil {
		return nil, err
	}
	if cfg.HTTP.Listen != config.ListenNone {
		if err := n.startHTTP(); err != nil {
			return nil, err
		}
	}
	n.logger.Info("esjet ready", "namespace", cfg.Namespace, "nats", n.broker.ClientURL(),
		"http", n.HTTPAddr(), "embedded", n.broker.Embedded())
	return n, nil
}

// ProvisionConfig maps the node config to stream provisioning.
func ProvisionConfig(cfg config.Config) streams.ProvisionConfig {
	return streams.ProvisionConfig{
		Replicas:              cfg.Streams.Replicas,
		DuplicateWindow:       cfg.Streams.DuplicateWindow.Std(),
		OutboxDuplicateWindow: cfg.Streams.OutboxDuplicateWindow.Std(),
		OutboxMaxAge:          cfg.Streams.OutboxMaxAge.Std(),
		ReceiptsMaxAge:        cfg.Streams.ReceiptsMaxAge.Std(),
		MaxMessageSize:        int(cfg.Streams.MaxMessageSize),
		Compression:           cfg.Streams.Compression != config.CompressionNone,
		DLQSettledMaxAge:      cfg.Streams.DLQSettledMaxAge.Std(),
		Archive:               cfg.Archive.Enabled(),
	}
}

// RelayConfig maps the node config to the relay's.
func RelayConfig(cfg config.Config) outbox.RelayConfig {
	return outbox.RelayConfig{
		Batch:     cfg.Outbox.RelayBatch,
		PinnedTTL: cfg.Outbox.FailoverAfter.Std(),
		AckWait:   cfg.Outbox.AckWait.Std(),
		AtomicMin: groupCommitMin(cfg),
		// Receipts older than this may be gone: the relay does not publish
		// a command it cannot tell from one that already ran.
		ReceiptsMaxAge: cfg.Streams.ReceiptsMaxAge.Std(),
	}
}

// RepositoryConfig maps the node config to the aggregate repository's.
func RepositoryConfig(cfg config.Config) aggregate.Config {
	a := cfg.Aggregates
	rc := aggregate.Config{
		Namespace:          cfg.Namespace,
		CacheSize:          a.CacheSize,
		CacheBytes:         int64(a.CacheBytes),
		SnapshotEvery:      a.SnapshotEvery,
		SnapshotSpan:       a.SnapshotSpan,
		ConflictRetries:    a.ConflictRetries,
		IdempotencyHorizon: a.IdempotencyHorizon.Std(),
		RawCommands:        map[string][]string{},
		Sites:              sitesRule(cfg),
	}
	for typ, raw := range a.Raw {
		rc.RawCommands[typ] = raw.Commands
	}
	// In the config 0 means "off"; in aggregate.Config it means "default".
	if rc.CacheSize == 0 {
		rc.CacheSize = -1
	}
	if rc.SnapshotEvery == 0 {
		rc.SnapshotEvery = -1
	}
	if rc.CacheBytes == 0 {
		rc.CacheBytes = -1
	}
	if rc.SnapshotSpan == 0 {
		rc.SnapshotSpan = -1
	}
	if rc.ConflictRetries == 0 {
		rc.ConflictRetries = -1
	}
	return rc
}

// LogConfig maps the node config to the event log's.
func LogConfig(cfg config.Config) streams.Config {
	return streams.Config{
		MaxMessageSize: int(cfg.Streams.MaxMessageSize),
		// A schedule must still be in OUTBOX when it fires; keep an hour of margin.
		MaxDelay: max(cfg.Streams.OutboxMaxAge.Std()-time.Hour, cfg.Streams.OutboxMaxAge.Std()/2),
		// One server fsyncing every write: concurrent decisions share one
		// atomic batch. On R3 raft batches by itself; under sync interval a
		// batch's staging costs more than it saves.
		GroupCommit: groupCommit(cfg),
	}
}

// Log is the node's event log.
func (n *Node) Log() *streams.Log { return n.log }

// Repository is the node's aggregate repository.
func (n *Node) Repository() *aggregate.Repository { return n.repo }

// API is the node's command and event-store API.
func (n *Node) API() *api.Service { return n.api }

// JetStream is the node's JetStream context.
func (n *Node) JetStream() jetstream.JetStream { return n.broker.JetStream() }

// Broker is the node's NATS connection (and embedded server).
func (n *Node) Broker() *broker.Broker { return n.broker }

// Config is the configuration the node runs with: the one it was started
// with, streams.replicas decided ([ResolveReplicas]).
func (n *Node) Config() config.Config { return n.cfg }

// Provisioned reports what Start did to each stream and bucket.
func (n *Node) Provisioned() []streams.Change { return n.changes }

// HTTPAddr is the address the HTTP listener is bound to ("" when disabled).
func (n *Node) HTTPAddr() string { return n.httpAddr }

// Workers are the node's command workers, one per kind.
func (n *Node) Workers() []*consumer.Worker { return n.workers }

// startWorkers starts a worker per configured kind and per Go handler, and
// warns about the kinds the aggregates can issue that none of them serves.
func (n *Node) startWorkers(ctx context.Context, opts Options, logger *slog.Logger) error {
	handlers := opts.Handlers
	kinds := map[string]consumer.KindConfig{}
	for kind, w := range n.cfg.Workers {
		if !runsHere(n.cfg, kind) {
			continue
		}
		kc := n.kindConfig(kind, w)
		switch w.Target {
		case config.TargetNATS:
			kc.Handler = consumer.NATSTarget{Conn: n.broker.Conn(), Subject: w.Subject}
		case config.TargetHTTP:
			kc.Handler = consumer.HTTPTarget{URL: w.URL}
		case config.TargetGo:
			h, ok := handlers[kind]
			if !ok {
				return fmt.Errorf("workers.%s: target \"go\" but no Go handler is registered for %s: `esjet run` has none — use target nats or http, or embed esjet and pass esjet.Options.Handlers[%q]", kind, kind, kind)
			}
			kc.Handler = h
		}
		kinds[kind] = kc
	}
	for kind, h := range handlers {
		if _, ok := kinds[kind]; !ok && runsHere(n.cfg, kind) {
			kc := n.kindConfig(kind, config.Worker{})
			kc.Handler = h
			kinds[kind] = kc
		}
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	n.workersStop = stop
	n.workersDone.Go(func() { _ = n.control.Run(wctx) })
	fb := n.feedbackFor()
	for _, kc := range kinds {
		kc.Handler = openingHandler{next: kc.Handler, s: &shred.Sealer{Keys: n.keys, KeepUnopened: n.cfg.Edge.Role == config.EdgeHub}}
		w, err := consumer.NewWorker(ctx, n.broker.JetStream(), n.cfg.Namespace, kc, fb, logger)
		if err != nil {
			return err
		}
		n.workers = append(n.workers, w)
		n.workersDone.Go(func() { _ = n.watch(wctx, "worker "+kc.Kind, w.Run(wctx)) })
	}
	served := map[string]bool{}
	for kind := range kinds {
		served[kind] = true
	}
	n.warnUnserved(opts.Aggregates, servedElsewhere(n.cfg, opts.Aggregates, served))
	return nil
}

// Relay is the node's outbox relay.
func (n *Node) Relay() *outbox.Relay { return n.relay }

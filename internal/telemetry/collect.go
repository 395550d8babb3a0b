package telemetry

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Sources are what a node's components already count, read when Prometheus
// scrapes. Any field may be nil.
type Sources struct {
	Repository func() RepositoryStats
	Relay      func() RelayStats
	Workers    func() []WorkerStats
	// Conn is the node's NATS connection: its state and reconnects.
	Conn *nats.Conn
	// JetStream and Namespace: the backlog ([ReadBacklog]).
	JetStream jetstream.JetStream
	Namespace string
	// Projections are the namespace's read models: each one's lag.
	Projections func(ctx context.Context) []ProjectionLag
	// NewerWaiting counts, by kind, the commands across the fleet that
	// wait for a worker that understands their schema.
	NewerWaiting func(ctx context.Context) (map[string]int, error)
}

// RepositoryStats are the aggregate repository's counters.
type RepositoryStats struct {
	CacheHits, ColdLoads, SnapshotHits, SnapshotsWritten, Conflicts, Replays, OutcomesRefused, RecordsRead, TailReads int64
	Cached                                                                                                            int
	// ArchiveReads are history reads that fell through to the archive.
	ArchiveReads int64
}

// RelayStats are the relay's counters on this node.
type RelayStats struct {
	Decisions, Commands, Duplicates, Scheduled, Failures, Undecodable, Scanned int64
}

// WorkerStats are one kind's worker counters on this node.
type WorkerStats struct {
	Kind                                                                        string
	Pool                                                                        int
	Done, Retried, Dead, Skipped, Poison, FeedbackErrors, Stale, UnreadReceipts int64
	// Paused: this node's workers of the kind pull nothing (the kind is
	// paused); RateWaiting: deliveries waiting for their rate limit's token
	// now; RateWaits: those that ever waited; KeyWaiting, KeyWaits: the
	// same for their concurrency key.
	Paused                                       bool
	RateWaiting, RateWaits, KeyWaiting, KeyWaits int64
	// Deferred: deliveries left for a newer worker (their schema was
	// newer than this node's workers understand).
	Deferred int64
}

// ProjectionLag is how far one projection is behind the log.
type ProjectionLag struct {
	Name    string
	Pending uint64        // decisions (log messages) after its lowest checkpoint
	Lag     time.Duration // age of the oldest of them
	Parked  int           // events parked (failed, or behind a failed one of their aggregate)
	Health  string        // green, yellow or red
}

// Watch registers the collector that reads src at every scrape.
func (t *Telemetry) Watch(src Sources) error {
	if t == nil {
		return nil
	}
	return t.Register(&collector{src: src, logger: t.logger})
}

type collector struct {
	src    Sources
	logger *slog.Logger
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	dCacheHits      = desc("esjet_aggregate_cache_hits_total", "Commands and reads served from the aggregate cache.")
	dColdLoads      = desc("esjet_aggregate_cold_loads_total", "Aggregates loaded from a snapshot and/or the log (cache misses).")
	dCached         = desc("esjet_aggregate_cached", "Aggregates in the cache now.")
	dSnapReads      = desc("esjet_snapshot_reads_total", "Cold loads that started from a snapshot.")
	dSnapWrites     = desc("esjet_snapshot_writes_total", "Snapshots written.")
	dConflicts      = desc("esjet_version_conflicts_total", "Appends refused by the aggregate's expected position; each is decided again on the reloaded tail (a retry) until aggregates.conflict_retries, then answered 409.")
	dReplays        = desc("esjet_idempotent_replays_total", "Retried requests (same Idempotency-Key) answered from the log.")
	dRefused        = desc("esjet_outcomes_refused_total", "Worker outcomes the aggregate refused (not an outstanding command).")
	dRecordsRead    = desc("esjet_log_records_read_total", "Decisions read from the log by loads and conflict reloads.")
	dArchiveReads   = desc("esjet_archive_reads_total", "History reads of archived aggregates that read their archive object (docs/archiving.md).")
	dRelayDecisions = desc("esjet_relay_decisions_total", "Decisions this node's relay acknowledged after their commands were in OUTBOX.")
	dRelayCommands  = desc("esjet_relay_commands_total", "Commands this node's relay carried to OUTBOX, by result: published, scheduled (a deliver-after), duplicate (OUTBOX had it).", "result")
	dRelayFailures  = desc("esjet_relay_failures_total", "Relay publishes that failed (the decisions are tried again).")
	dRelayUndecod   = desc("esjet_relay_undecodable_total", "Messages on EVENTS that are not esjet decisions (skipped).")
	dRelayPending   = desc("esjet_relay_lag_decisions", "Decisions in EVENTS the relay has not acknowledged yet (any node's relay).")
	dRelayLag       = desc("esjet_relay_lag_seconds", "Age of the oldest decision the relay has not acknowledged yet (0 when none).")
	dPending        = desc("esjet_outbox_pending", "Commands in OUTBOX not yet delivered to a worker, per kind.", "kind")
	dInFlight       = desc("esjet_outbox_in_flight", "Commands delivered to a worker and not acknowledged yet (handled now, or waiting out a retry's backoff), per kind.", "kind")
	dWaiting        = desc("esjet_outbox_waiting_pulls", "Idle worker pull requests on a kind's consumer, all nodes.", "kind")
	dDead           = desc("esjet_dlq_depth", "Dead letters not settled (retried or discarded) yet, per kind.", "kind")
	dBacklogUp      = desc("esjet_backlog_up", "1 when JetStream answered the backlog queries of this scrape (relay lag, OUTBOX, DLQ), else 0.")
	dPool           = desc("esjet_worker_pool", "Workers this node runs for a kind.", "kind")
	dOutcomes       = desc("esjet_worker_deliveries_total", "Deliveries a kind's workers finished, by outcome: done, retried, dead, skipped (done before), poison (undecodable), stale (left to a newer holder), deferred (a schema newer than this node's workers understand: left for a newer worker, no attempt counted).", "kind", "outcome")
	dNewerWaiting   = desc("esjet_commands_waiting_newer_worker", "Commands across the fleet waiting for a worker that understands their schema (deferred at least once, not finished yet), per kind.", "kind")
	dFeedbackErrors = desc("esjet_worker_feedback_errors_total", "Outcomes a kind's workers could not report to the aggregate yet (tried again).", "kind")
	dUnreadReceipts = desc("esjet_worker_receipt_read_failures_total", "Receipt reads that failed before a command could run (read again; the command waits).", "kind")
	dFlowPaused     = desc("esjet_worker_paused", "1 while this node's workers of a kind pull nothing because an operator paused it (esjet workers pause).", "kind")
	dFlowWaiting    = desc("esjet_worker_flow_waiting", "Deliveries waiting now before their call, by reason: rate (their rate limit's token), key (a slot of their concurrency key).", "kind", "reason")
	dFlowWaits      = desc("esjet_worker_flow_waits_total", "Deliveries that had to wait before their call, by reason: rate, key.", "kind", "reason")
	dConnected      = desc("esjet_nats_connected", "1 while the node's NATS connection is connected, else 0.")
	dReconnects     = desc("esjet_nats_reconnects_total", "Times the node's NATS connection reconnected.")
	dProjPending    = desc("esjet_projection_lag_decisions", "Decisions (log messages) after a projection's lowest checkpoint: not applied yet.", "projection")
	dProjLag        = desc("esjet_projection_lag_seconds", "Age of the oldest decision a projection has not applied yet.", "projection")
	dProjParked     = desc("esjet_projection_parked", "Events a projection parked (its handler failed, or an earlier event of the aggregate did).", "projection")
	dProjHealth     = desc("esjet_projection_health", "1 for a projection's health: green, yellow (paused, or events parked) or red (a partition without a live owner, or stopped at a failing event).", "projection", "health")
)

var allDescs = []*prometheus.Desc{dCacheHits, dColdLoads, dCached, dSnapReads, dSnapWrites, dConflicts, dReplays, dRefused,
	dRecordsRead, dArchiveReads, dRelayDecisions, dRelayCommands, dRelayFailures, dRelayUndecod, dRelayPending, dRelayLag, dPending,
	dInFlight, dWaiting, dDead, dBacklogUp, dPool, dOutcomes, dFeedbackErrors, dUnreadReceipts, dFlowPaused, dFlowWaiting, dFlowWaits, dConnected, dReconnects, dProjPending, dProjLag, dProjParked, dProjHealth, dNewerWaiting}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v int64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.src
	if s.Repository != nil {
		r := s.Repository()
		counter(ch, dCacheHits, r.CacheHits)
		counter(ch, dColdLoads, r.ColdLoads)
		gauge(ch, dCached, float64(r.Cached))
		counter(ch, dSnapReads, r.SnapshotHits)
		counter(ch, dSnapWrites, r.SnapshotsWritten)
		counter(ch, dConflicts, r.Conflicts)
		counter(ch, dReplays, r.Replays)
		counter(ch, dRefused, r.OutcomesRefused)
		counter(ch, dRecordsRead, r.RecordsRead)
		counter(ch, dArchiveReads, r.ArchiveReads)
	}
	if s.Relay != nil {
		r := s.Relay()
		counter(ch, dRelayDecisions, r.Decisions)
		counter(ch, dRelayCommands, r.Commands, "published")
		counter(ch, dRelayCommands, r.Scheduled, "scheduled")
		counter(ch, dRelayCommands, r.Duplicates, "duplicate")
		counter(ch, dRelayFailures, r.Failures)
		counter(ch, dRelayUndecod, r.Undecodable)
	}
	if s.Workers != nil {
		for _, w := range s.Workers() {
			gauge(ch, dPool, float64(w.Pool), w.Kind)
			for _, o := range []struct {
				name string
				v    int64
			}{{"done", w.Done}, {"retried", w.Retried}, {"dead", w.Dead}, {"skipped", w.Skipped}, {"poison", w.Poison}, {"stale", w.Stale}, {"deferred", w.Deferred}} {
				counter(ch, dOutcomes, o.v, w.Kind, o.name)
			}
			counter(ch, dFeedbackErrors, w.FeedbackErrors, w.Kind)
			counter(ch, dUnreadReceipts, w.UnreadReceipts, w.Kind)
			paused := 0.0
			if w.Paused {
				paused = 1
			}
			gauge(ch, dFlowPaused, paused, w.Kind)
			gauge(ch, dFlowWaiting, float64(w.RateWaiting), w.Kind, "rate")
			counter(ch, dFlowWaits, w.RateWaits, w.Kind, "rate")
			gauge(ch, dFlowWaiting, float64(w.KeyWaiting), w.Kind, "key")
			counter(ch, dFlowWaits, w.KeyWaits, w.Kind, "key")
		}
	}
	if s.Conn != nil {
		connected := 0.0
		if s.Conn.IsConnected() {
			connected = 1
		}
		gauge(ch, dConnected, connected)
		counter(ch, dReconnects, int64(s.Conn.Stats().Reconnects))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if s.JetStream != nil {
		c.collectBacklog(ctx, ch)
	}
	if s.NewerWaiting != nil {
		if byKind, err := s.NewerWaiting(ctx); err == nil {
			for kind, n := range byKind {
				gauge(ch, dNewerWaiting, float64(n), kind)
			}
		}
	}
	if s.Projections != nil {
		for _, p := range s.Projections(ctx) {
			gauge(ch, dProjPending, float64(p.Pending), p.Name)
			gauge(ch, dProjLag, p.Lag.Seconds(), p.Name)
			gauge(ch, dProjParked, float64(p.Parked), p.Name)
			for _, h := range []string{"green", "yellow", "red"} {
				v := 0.0
				if h == p.Health {
					v = 1
				}
				gauge(ch, dProjHealth, v, p.Name, h)
			}
		}
	}
}

func (c *collector) collectBacklog(ctx context.Context, ch chan<- prometheus.Metric) {
	b, err := ReadBacklog(ctx, c.src.JetStream, c.src.Namespace)
	up := 1.0
	if err != nil {
		up = 0
		c.logger.Debug("backlog not read for /metrics", "error", err)
	}
	gauge(ch, dBacklogUp, up)
	gauge(ch, dRelayPending, float64(b.RelayPending))
	gauge(ch, dRelayLag, b.RelayLag.Seconds())
	for kind, k := range b.Kinds {
		gauge(ch, dPending, float64(k.Pending), kind)
		gauge(ch, dInFlight, float64(k.InFlight), kind)
		gauge(ch, dWaiting, float64(k.Waiting), kind)
		gauge(ch, dDead, float64(k.Dead), kind)
	}
}

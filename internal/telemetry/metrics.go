package telemetry

import (
	"context"
	"errors"
	"regexp"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// The metrics counted as things happen. Labels are bounded: aggregate
// types and command kinds the node serves (anything else is counted as
// [Unknown]), results from a fixed list — never an id.
type metrics struct {
	commands        *prometheus.CounterVec   // type, command, result
	commandDuration *prometheus.HistogramVec // type, command
	decideDuration  *prometheus.HistogramVec // type
	appendDuration  prometheus.Histogram
	relayBatch      prometheus.Histogram
	relayDelay      prometheus.Histogram
	attempts        *prometheus.CounterVec   // kind, result
	handlerDuration *prometheus.HistogramVec // kind
}

// Unknown is the type or command label of a request naming one the node
// does not serve: a label value from a client's input would be unbounded.
const Unknown = "_unknown"

// Command results (the result label of esjet_commands_total).
const (
	ResultOK          = "ok"
	ResultReplayed    = "replayed"    // an idempotent retry answered from the log
	ResultInvalid     = "invalid"     // 400, 413: bad input, nothing written
	ResultForbidden   = "forbidden"   // 403: an outcome kind, a raw kind not allowed
	ResultNotFound    = "not_found"   // 404
	ResultConflict    = "conflict"    // 409: retries exhausted, key reused, raw version
	ResultRejected    = "rejected"    // 422: the domain said no
	ResultUnavailable = "unavailable" // 503: outcome unknown, retry with the key
	ResultError       = "error"       // 500
)

// ResultOf maps an API status to a result label.
func ResultOf(status int, replayed bool) string {
	switch {
	case status < 300 && replayed:
		return ResultReplayed
	case status < 300:
		return ResultOK
	case status == 403:
		return ResultForbidden
	case status == 404:
		return ResultNotFound
	case status == 409:
		return ResultConflict
	case status == 422:
		return ResultRejected
	case status == 503:
		return ResultUnavailable
	case status < 500:
		return ResultInvalid
	}
	return ResultError
}

// latency buckets: 0.5 ms … ~16 s.
var latency = prometheus.ExponentialBuckets(0.0005, 2, 16)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "esjet_commands_total",
			Help: "Commands handled, by aggregate type, command (outcomes included: <kind>_done, <kind>_failed) and result."},
			[]string{"type", "command", "result"}),
		commandDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "esjet_command_duration_seconds",
			Help: "Time to handle a command: load, decide, append, answer.", Buckets: latency}, []string{"type", "command"}),
		decideDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "esjet_decide_duration_seconds",
			Help: "Time in an aggregate's Decide.", Buckets: prometheus.ExponentialBuckets(0.00001, 4, 10)}, []string{"type"}),
		appendDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "esjet_append_duration_seconds",
			Help: "Time to append a decision to EVENTS (until the stream's ack).", Buckets: latency}),
		relayBatch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "esjet_relay_batch_size",
			Help: "Decisions the relay carried to OUTBOX together.", Buckets: prometheus.ExponentialBuckets(1, 2, 10)}),
		relayDelay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "esjet_relay_delay_seconds",
			Help: "From a decision stored in EVENTS to its command published to OUTBOX.", Buckets: latency}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "esjet_worker_attempts_total",
			Help: "Calls of a kind's handler (target), by result: ok, retryable, terminal, stale, unavailable, lease_lost, stopping."},
			[]string{"kind", "result"}),
		handlerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "esjet_worker_handler_duration_seconds",
			Help: "Time a kind's handler (target) took per attempt.", Buckets: latency}, []string{"kind"}),
	}
	return m, errors.Join(reg.Register(m.commands), reg.Register(m.commandDuration), reg.Register(m.decideDuration),
		reg.Register(m.appendDuration), reg.Register(m.relayBatch), reg.Register(m.relayDelay),
		reg.Register(m.attempts), reg.Register(m.handlerDuration))
}

// CommandDone counts a command handled in d with result (see [ResultOf]).
// typ and kind must be ones the node serves (or [Unknown]).
func (t *Telemetry) CommandDone(typ, kind, result string, d time.Duration) {
	if t == nil {
		return
	}
	t.m.commands.WithLabelValues(typ, kind, result).Inc()
	t.m.commandDuration.WithLabelValues(typ, kind).Observe(d.Seconds())
}

// Decided records the time an aggregate type's Decide took.
func (t *Telemetry) Decided(typ string, d time.Duration) {
	if t == nil {
		return
	}
	t.m.decideDuration.WithLabelValues(typ).Observe(d.Seconds())
}

// Appended records the time an append to EVENTS took.
func (t *Telemetry) Appended(d time.Duration) {
	if t == nil {
		return
	}
	t.m.appendDuration.Observe(d.Seconds())
}

// RelayBatch records the size of a batch of decisions the relay carries.
func (t *Telemetry) RelayBatch(n int) {
	if t == nil {
		return
	}
	t.m.relayBatch.Observe(float64(n))
}

// Call is one call of a kind's handler: a client span whose traceparent
// the target receives, and the attempt's figures.
type Call struct {
	t     *Telemetry
	kind  string
	start time.Time
	span  Span
}

// StartCall starts a call of kind's handler under the worker's span in
// ctx; send Call.TraceParent with the request. tp is the traceparent to
// keep without telemetry.
func (t *Telemetry) StartCall(ctx context.Context, kind, tp string) (context.Context, Call) {
	if t == nil {
		return ctx, Call{span: Span{tp: tp}}
	}
	ctx, sp := t.start(ctx, trace.SpanContext{}, "esjet.call "+kind, trace.SpanKindClient,
		trace.WithAttributes(attribute.String("esjet.command.kind", kind)))
	return ctx, Call{t: t, kind: kind, start: time.Now(), span: sp}
}

// TraceParent is what the target receives as traceparent.
func (c Call) TraceParent() string { return c.span.TraceParent() }

// End records the attempt's result (a fixed word: ok, retryable, terminal,
// stale, unavailable, lease_lost, stopping) and its duration.
func (c Call) End(result string, err error) {
	if c.t == nil {
		return
	}
	c.t.m.attempts.WithLabelValues(c.kind, result).Inc()
	c.t.m.handlerDuration.WithLabelValues(c.kind).Observe(time.Since(c.start).Seconds())
	c.span.SetAttributes(attribute.String("esjet.attempt.result", result))
	c.span.End(err)
}

// fqName reads a metric's name out of its descriptor.
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// MetricNames lists every metric family the node can serve, sorted,
// whether or not it has samples yet: the names dashboards and alert rules
// may use.
func (t *Telemetry) MetricNames() []string {
	if t == nil {
		return nil
	}
	names := map[string]bool{}
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range []prometheus.Collector{t.m.commands, t.m.commandDuration, t.m.decideDuration, t.m.appendDuration,
			t.m.relayBatch, t.m.relayDelay, t.m.attempts, t.m.handlerDuration, &collector{}} {
			c.Describe(ch)
		}
		close(ch)
	}()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
		}
	}
	if fams, err := t.reg.Gather(); err == nil {
		for _, f := range fams {
			names[f.GetName()] = true
		}
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

package wire

import (
	"strconv"
	"strings"
)

// Names are the JetStream objects of one namespace and the whole-stream
// subject filters they are provisioned with. <ns> is the namespace (a
// bounded context, e.g. trips), <NS> its upper case:
//
//	event log     stream <NS>_EVENTS, subjects <ns>.evt.>, one literal
//	              subject per aggregate: <ns>.evt.<type>.<id>
//	outbox        stream <NS>_OUTBOX, subjects <ns>.outbox.> (and delayed
//	              commands' schedules on <ns>.schedule.>)
//	dead letters  stream <NS>_DLQ, subjects <ns>.dlq.>
//	snapshots     KV <ns>_snapshots, key <type>.<id>
//	receipts      KV <ns>_receipts, key [ReceiptKey]
//	workers       KV <ns>_workers: pauses, rate limits, per-key leases (workers.go)
//	read models   KV <ns>_projections (control) and <ns>_view_<name>
//	              ([ViewBuckets])
//	reconcile     object store <ns>_reconcile (its checkpoint)
type Names struct {
	Namespace string // e.g. "trips"
	Events    string // stream <NS>_EVENTS, subjects <ns>.evt.>
	Outbox    string // stream <NS>_OUTBOX, subjects <ns>.outbox.>
	DLQ       string // stream <NS>_DLQ, subjects <ns>.dlq.>
	Snapshots string // KV bucket <ns>_snapshots
	Receipts  string // KV bucket <ns>_receipts
	Workers   string // KV bucket <ns>_workers
}

// NamesFor returns the names for namespace ns. ns must already be valid (see
// config.Validate): lower-case letters, digits, '_' and '-'.
func NamesFor(ns string) Names {
	up := strings.ToUpper(ns)
	return Names{
		Namespace: ns,
		Events:    up + "_EVENTS",
		Outbox:    up + "_OUTBOX",
		DLQ:       up + "_DLQ",
		Snapshots: ns + "_snapshots",
		Receipts:  ns + "_receipts",
		Workers:   ns + "_workers",
	}
}

// NamespaceOfEvents is the namespace whose event log stream is named
// stream ([Names].Events), if stream is one.
func NamespaceOfEvents(stream string) (string, bool) {
	up, ok := strings.CutSuffix(stream, NamesFor("").Events)
	if !ok || up == "" || up != strings.ToUpper(up) {
		return "", false
	}
	return strings.ToLower(up), true
}

// EventsFilter is the subject filter of the whole event log.
func (n Names) EventsFilter() string { return n.Namespace + ".evt.>" }

// TypeFilter is the subject filter of every aggregate of type typ:
// <ns>.evt.<type>.>. typ must already be valid.
func (n Names) TypeFilter(typ string) string { return n.TypePrefix(typ) + ">" }

// TypePrefix is what every aggregate subject of type typ starts with:
// <ns>.evt.<type>. (the id follows).
func (n Names) TypePrefix(typ string) string { return n.Namespace + ".evt." + typ + "." }

// IsAggregateSubject reports whether subject is the aggregate subject of
// typ/id (in whatever namespace): it ends in .evt.<type>.<id>.
func IsAggregateSubject(subject, typ, id string) bool {
	return strings.HasSuffix(subject, ".evt."+typ+"."+id)
}

// OutboxFilter is the subject filter of the whole outbox.
func (n Names) OutboxFilter() string { return n.Namespace + ".outbox.>" }

// OutboxPrefix is what every command subject starts with: <ns>.outbox.
// (the kind follows).
func (n Names) OutboxPrefix() string { return n.Namespace + ".outbox." }

// ScheduleFilter is the subject filter of delayed commands' schedules (in
// the OUTBOX stream).
func (n Names) ScheduleFilter() string { return n.Namespace + ".schedule.>" }

// SchedulePrefix is what every schedule subject starts with: <ns>.schedule.
func (n Names) SchedulePrefix() string { return n.Namespace + ".schedule." }

// DLQFilter is every subject of the DLQ stream: dead letters on
// <ns>.dlq.<kind> and their audit trail on <ns>.dlq.audit.<kind>. To read
// dead letters only, use [DeadLetterFilter].
func (n Names) DLQFilter() string { return n.Namespace + ".dlq.>" }

// DLQPrefix is what every subject of the DLQ stream starts with: <ns>.dlq.
func (n Names) DLQPrefix() string { return n.Namespace + ".dlq." }

// AuditPrefix is what every audit record's subject starts with:
// <ns>.dlq.audit.
func (n Names) AuditPrefix() string { return n.Namespace + ".dlq.audit." }

// AggregateSubject is the one literal subject of an aggregate. It validates
// both tokens and builds nothing from bad input.
func (n Names) AggregateSubject(typ, id string) (string, error) {
	a, err := NewAggregateRef(typ, id)
	if err != nil {
		return "", err
	}
	return n.SubjectOf(a), nil
}

// SubjectOf is aggregate a's one literal subject: <ns>.evt.<type>.<id>. a's
// tokens were checked when it was made; the zero AggregateRef names no
// aggregate and has no subject (""), which no read or write accepts.
func (n Names) SubjectOf(a AggregateRef) string {
	if a.IsZero() {
		return ""
	}
	return n.TypePrefix(a.typ) + a.id
}

// AggregateRef is one aggregate, its type and id checked as subject tokens
// ([ValidateToken]) by [NewAggregateRef], the only way to make one. A
// write validates them once, where it comes in, and passes this value down:
// the layers below build its subject ([Names.SubjectOf]) without checking
// again.
type AggregateRef struct{ typ, id string }

// NewAggregateRef checks typ and id: a [*TokenError] names the bad one
// ("aggregate type" or "aggregate id").
func NewAggregateRef(typ, id string) (AggregateRef, error) {
	if err := ValidateToken("aggregate type", typ); err != nil {
		return AggregateRef{}, err
	}
	if err := ValidateToken("aggregate id", id); err != nil {
		return AggregateRef{}, err
	}
	return AggregateRef{typ: typ, id: id}, nil
}

// Type and ID are the aggregate's type and id.
func (a AggregateRef) Type() string { return a.typ }
func (a AggregateRef) ID() string   { return a.id }

// IsZero reports the zero AggregateRef, which names no aggregate.
func (a AggregateRef) IsZero() bool { return a.typ == "" }

// String is <type>/<id>.
func (a AggregateRef) String() string { return a.typ + "/" + a.id }

// ProjectionsBucket is the namespace's projection control bucket: per
// projection its control record, its partitions' leases and the operators'
// requests.
func ProjectionsBucket(ns string) string { return ns + "_projections" }

// ViewBucketPrefix starts the name of every view bucket of namespace ns.
func ViewBucketPrefix(ns string) string { return ns + "_view_" }

// ViewBuckets are the names of the buckets view name's generations take
// turns in: <ns>_view_<name>, then <ns>_view_<name>-b and -c ('-' is never
// in a projection name, so no other view's bucket has these names).
func ViewBuckets(ns, name string) []string {
	base := ViewBucketPrefix(ns) + name
	return []string{base, base + "-b", base + "-c"}
}

// LegacyViewBucket is where a view generation made before the slots of
// [ViewBuckets] lives: <ns>_view_<name>_g<gen> (generation 1 was
// <ns>_view_<name>).
func LegacyViewBucket(ns, name string, gen int) string {
	if gen <= 1 {
		return ViewBucketPrefix(ns) + name
	}
	return ViewBucketPrefix(ns) + name + "_g" + strconv.Itoa(gen)
}

// ReconcileBucket is the object store holding namespace ns's reconcile
// checkpoint.
func ReconcileBucket(ns string) string { return ns + "_reconcile" }

// IsNodeBucket reports whether bucket is one the node of namespace ns keeps
// (snapshots, receipts, workers, projection control, views, data keys): no receiver may name
// it as its own.
func IsNodeBucket(ns, bucket string) bool {
	n := NamesFor(ns)
	return bucket == n.Snapshots || bucket == n.Receipts || bucket == n.Workers || bucket == ProjectionsBucket(ns) || bucket == KeysBucket(ns) ||
		strings.HasPrefix(bucket, ViewBucketPrefix(ns))
}

// Outcomes is an edge hub's stream of outcomes of hub kinds on their way
// back to the site that issued the command: subjects <ns>.outcome.<site>.
func (n Names) Outcomes() string { return strings.ToUpper(n.Namespace) + "_OUTCOMES" }

// OutcomeSubject is where the hub records an outcome for site.
func (n Names) OutcomeSubject(site string) string { return n.Namespace + ".outcome." + site }

// OutcomesFilter is every subject of the hub's OUTCOMES stream.
func (n Names) OutcomesFilter() string { return n.Namespace + ".outcome.>" }

// KVAll and ObjectAll match every KV bucket's and every object store's
// subjects: each node's own, never carried across an edge leaf link.
const (
	KVAll     = kvSubjectPrefix + ">"
	ObjectAll = "$O.>"
)

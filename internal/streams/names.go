package streams

import "strings"

// Names are the JetStream objects of one namespace (DESIGN.md, "Streams,
// subjects, buckets"), and the whole-stream subject filters they are
// provisioned with. The subjects inside OUTBOX and the DLQ (per kind, per
// command) belong to the OUTBOX contract: package wire builds them.
type Names struct {
	Namespace string // e.g. "trips"
	Events    string // stream <NS>_EVENTS, subjects <ns>.evt.>
	Outbox    string // stream <NS>_OUTBOX, subjects <ns>.outbox.>
	DLQ       string // stream <NS>_DLQ, subjects <ns>.dlq.>
	Snapshots string // KV bucket <ns>_snapshots
	Receipts  string // KV bucket <ns>_receipts
	Workers   string // KV bucket <ns>_workers: pauses, rate limits, per-key leases
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

// EventsFilter is the subject filter of the whole event log.
func (n Names) EventsFilter() string { return n.Namespace + ".evt.>" }

// OutboxFilter is the subject filter of the whole outbox.
func (n Names) OutboxFilter() string { return n.Namespace + ".outbox.>" }

// ScheduleFilter is the subject filter of delayed commands' schedules (in
// the OUTBOX stream).
func (n Names) ScheduleFilter() string { return n.Namespace + ".schedule.>" }

// DLQFilter is every subject of the DLQ stream: dead letters on
// <ns>.dlq.<kind> and their audit trail on <ns>.dlq.audit.<kind>. To read
// dead letters only, use wire.DeadLetterFilter.
func (n Names) DLQFilter() string { return n.Namespace + ".dlq.>" }

// AggregateSubject is the one literal subject of an aggregate. It validates
// both tokens and builds nothing from bad input.
func (n Names) AggregateSubject(typ, id string) (string, error) {
	if err := ValidateToken("aggregate type", typ); err != nil {
		return "", err
	}
	if err := ValidateToken("aggregate id", id); err != nil {
		return "", err
	}
	return n.Namespace + ".evt." + typ + "." + id, nil
}

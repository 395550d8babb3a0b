package wire

import (
	"strings"
)

// Subjects of the OUTBOX and DLQ streams. The streams themselves (and their
// whole-stream filters <ns>.outbox.>, <ns>.schedule.>, <ns>.dlq.>) are
// provisioned by internal/streams; these are the subjects inside them.
//
// Tokens (namespace, kind, command id parts) must already be valid
// ([ValidateToken]); [CommandSubjectFor] and [DeadLetterSubjectFor]
// validate a kind that comes from input.

// CommandSubject is where commands of kind are published and consumed:
// <ns>.outbox.<kind>.
func CommandSubject(ns, kind string) string { return ns + ".outbox." + kind }

// CommandSubjectFor is [CommandSubject] for a kind from input: it returns
// the token's error and builds nothing from bad input.
func CommandSubjectFor(ns, kind string) (string, error) {
	if err := ValidateToken("command kind", kind); err != nil {
		return "", err
	}
	return CommandSubject(ns, kind), nil
}

// ScheduleSubject is the subject of a delayed command's schedule message,
// <ns>.schedule.<kind>.<command id with dots>: unique per command, so one
// schedule never replaces another.
func ScheduleSubject(ns, kind, commandID string) string {
	return ns + ".schedule." + kind + "." + ReceiptKey(commandID)
}

// ScheduleFilterFor matches the schedule of command id, whatever its kind.
func ScheduleFilterFor(ns, commandID string) string {
	return ns + ".schedule.*." + ReceiptKey(commandID)
}

// KindOfSchedule returns the kind token of a schedule subject, "" when the
// subject is not one of namespace ns.
func KindOfSchedule(ns, subject string) string {
	rest, ok := strings.CutPrefix(subject, ns+".schedule.")
	if !ok {
		return ""
	}
	kind, _, _ := strings.Cut(rest, ".")
	return kind
}

// Dead letters live in <NS>_DLQ on <ns>.dlq.<kind> (three tokens). Every
// retry or discard first writes an audit record to the same stream on
// <ns>.dlq.audit.<kind> (four tokens), then removes the dead letter.
// Readers tell them apart by subject: [DeadLetterFilter] and
// [AuditFilter], never <ns>.dlq.> (which holds both).

// DeadLetterSubject is where dead letters of kind are stored.
func DeadLetterSubject(ns, kind string) string { return ns + ".dlq." + kind }

// DeadLetterSubjectFor is [DeadLetterSubject] for a kind from input.
func DeadLetterSubjectFor(ns, kind string) (string, error) {
	if err := ValidateToken("command kind", kind); err != nil {
		return "", err
	}
	return DeadLetterSubject(ns, kind), nil
}

// AuditSubject is where the audit records of kind's dead letters are stored.
func AuditSubject(ns, kind string) string { return ns + ".dlq.audit." + kind }

// DeadLetterFilter matches every dead letter of namespace ns, and no audit
// record.
func DeadLetterFilter(ns string) string { return ns + ".dlq.*" }

// AuditFilter matches every audit record of namespace ns.
func AuditFilter(ns string) string { return ns + ".dlq.audit.*" }

// IsDeadLetterSubject reports whether subject is a dead letter of namespace
// ns (not an audit record).
func IsDeadLetterSubject(ns, subject string) bool {
	rest, ok := strings.CutPrefix(subject, ns+".dlq.")
	return ok && rest != "" && !strings.Contains(rest, ".")
}

// Priorities are the bands, highest first.
var Priorities = []string{PriorityHigh, PriorityNormal, PriorityLow}

// BandSubject is where commands of kind with priority p are published and
// consumed: a normal command on <ns>.outbox.<kind> (as before priorities),
// a high or low one on <ns>.outbox.<kind>.<high|low>.
func BandSubject(ns, kind, p string) string {
	if p == PriorityNormal {
		return CommandSubject(ns, kind)
	}
	return CommandSubject(ns, kind) + "." + p
}

// KindOfCommandSubject is the kind of an OUTBOX command subject of any band
// ("" if subject is not one of namespace ns).
func KindOfCommandSubject(ns, subject string) string {
	rest, ok := strings.CutPrefix(subject, ns+".outbox.")
	if !ok {
		return ""
	}
	kind, _, _ := strings.Cut(rest, ".")
	return kind
}

// BandConsumerName is the durable consumer of kind's workers for priority
// p: [WorkerConsumerName] for normal (the consumer before priorities),
// esjet-band-<high|low>-<kind> for the others (a prefix no kind's worker
// consumer has, so no kind's band can take another kind's name).
func BandConsumerName(kind, p string) string {
	if p == PriorityNormal {
		return WorkerConsumerName(kind)
	}
	return "esjet-band-" + p + "-" + kind
}

// KindOfBandConsumer reads a band consumer's name ([BandConsumerName]):
// its kind and priority; ok is false for any other consumer.
func KindOfBandConsumer(name string) (kind, priority string, ok bool) {
	if kind, ok := strings.CutPrefix(name, WorkerConsumerPrefix); ok && kind != "" {
		return kind, PriorityNormal, true
	}
	for _, p := range []string{PriorityHigh, PriorityLow} {
		if kind, ok := strings.CutPrefix(name, "esjet-band-"+p+"-"); ok && kind != "" {
			return kind, p, true
		}
	}
	return "", "", false
}

// WorkerConsumerPrefix names the durable consumer of one kind's workers on
// OUTBOX: esjet-worker-<kind>.
const WorkerConsumerPrefix = "esjet-worker-"

// WorkerConsumerName is the durable consumer of kind's workers on OUTBOX.
func WorkerConsumerName(kind string) string { return WorkerConsumerPrefix + kind }

// RelayConsumerName is the relay's durable consumer on <NS>_EVENTS: its ack
// floor says which decisions have all their commands in OUTBOX.
const RelayConsumerName = "esjet-relay"

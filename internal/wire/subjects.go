package wire

import (
	"strconv"
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

// Dead letters live in <NS>_DLQ, one subject per letter, so that a settled
// letter can leave a stream that denies deletes (the DLQ keeps one message
// per subject, and a message can carry its own expiry, Nats-TTL):
//
//	<ns>.dlq.letter.<kind>.<outbox seq>   a dead letter (the OUTBOX copy that
//	                                      failed names it); when it is
//	                                      settled, a settle mark with a short
//	                                      TTL replaces it, so the subject
//	                                      empties
//	<ns>.dlq.settled.<kind>.<dlq seq>     the settled letter, whole, until its
//	                                      TTL (streams.dlq_settled_max_age)
//	<ns>.dlq.audit.<kind>.<dlq seq>       the audit record of its retry or
//	                                      discard: compact, kept
//
// Readers tell them apart by subject ([DeadLetterFilter], [SettledFilter],
// [AuditFilter]); never by <ns>.dlq.>, which holds all three. Reading the
// open letters reads only them (and the marks of the last second).

// DeadLetterSubject is where the dead letter of the OUTBOX copy at
// outboxSeq of a command of kind is stored.
func DeadLetterSubject(ns, kind string, outboxSeq uint64) string {
	return ns + ".dlq.letter." + kind + "." + strconv.FormatUint(outboxSeq, 10)
}

// DeadLetterFilter matches every dead letter of namespace ns (and the
// settle marks that replace settled ones), no audit record and no settled
// copy.
func DeadLetterFilter(ns string) string { return ns + ".dlq.letter.*.*" }

// DeadLetterFilterFor matches every dead letter of kind, a kind from input:
// it returns the token's error and builds nothing from bad input.
func DeadLetterFilterFor(ns, kind string) (string, error) {
	if err := ValidateToken("command kind", kind); err != nil {
		return "", err
	}
	return ns + ".dlq.letter." + kind + ".*", nil
}

// KindOfDeadLetter returns the kind token of a dead letter's subject, and
// false when subject is not one of namespace ns.
func KindOfDeadLetter(ns, subject string) (string, bool) {
	return middleToken(subject, ns+".dlq.letter.")
}

// IsDeadLetterSubject reports whether subject is a dead letter's of
// namespace ns (not an audit record or a settled copy).
func IsDeadLetterSubject(ns, subject string) bool {
	_, ok := KindOfDeadLetter(ns, subject)
	return ok
}

// SettledSubject is where the settled letter once at DLQ sequence dlqSeq
// is kept until its TTL.
func SettledSubject(ns, kind string, dlqSeq uint64) string {
	return ns + ".dlq.settled." + kind + "." + strconv.FormatUint(dlqSeq, 10)
}

// SettledFilter matches every settled letter of namespace ns.
func SettledFilter(ns string) string { return ns + ".dlq.settled.*.*" }

// AuditSubject is where the audit record of the dead letter of kind at DLQ
// sequence dlqSeq is stored.
func AuditSubject(ns, kind string, dlqSeq uint64) string {
	return ns + ".dlq.audit." + kind + "." + strconv.FormatUint(dlqSeq, 10)
}

// AuditFilter matches every audit record of namespace ns (and those of an
// older esjet, one subject per kind: <ns>.dlq.audit.<kind>).
func AuditFilter(ns string) string { return ns + ".dlq.audit.>" }

// AuditKindFilter matches the audit records of kind's dead letters.
func AuditKindFilter(ns, kind string) string { return ns + ".dlq.audit." + kind + ".*" }

// AuditSeqFilter matches the audit record of the dead letter at DLQ
// sequence dlqSeq, whatever its kind.
func AuditSeqFilter(ns string, dlqSeq uint64) string {
	return ns + ".dlq.audit.*." + strconv.FormatUint(dlqSeq, 10)
}

// KindOfAudit returns the kind token of an audit record's subject, and
// false when subject is not one of namespace ns.
func KindOfAudit(ns, subject string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, ns+".dlq.audit.")
	if !ok || rest == "" {
		return "", false
	}
	kind, _, _ := strings.Cut(rest, ".")
	return kind, true
}

// middleToken returns the token between prefix and one last token of
// subject.
func middleToken(subject, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(subject, prefix)
	if !ok {
		return "", false
	}
	kind, last, ok := strings.Cut(rest, ".")
	if !ok || kind == "" || last == "" || strings.Contains(last, ".") {
		return "", false
	}
	return kind, true
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

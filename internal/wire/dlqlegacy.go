package wire

import (
	"encoding/json"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// An older esjet kept every dead letter of a kind on one subject,
// <ns>.dlq.<kind> (three tokens), and every audit record of a kind on
// another, <ns>.dlq.audit.<kind> (four tokens), in a DLQ that kept every
// message of a subject. Today's DLQ keeps one message per subject, so
// updating an older one would cut each of those subjects to its newest
// message: provisioning first copies each letter to its own subject
// (open: [DeadLetterSubject]; settled: [SettledSubject] and its audit
// record on [AuditSubject]), then updates the stream, then empties the
// older subjects with a [LegacyMark] each.

// LegacyDeadLetterSubject is where an older esjet stored every dead letter
// of kind.
func LegacyDeadLetterSubject(ns, kind string) string { return ns + ".dlq." + kind }

// LegacyAuditSubject is where an older esjet stored the audit records of
// kind's dead letters.
func LegacyAuditSubject(ns, kind string) string { return ns + ".dlq.audit." + kind }

// LegacyDeadLetterFilter matches an older esjet's dead letter subjects and
// nothing of today's (whose subjects have five tokens).
func LegacyDeadLetterFilter(ns string) string { return ns + ".dlq.*" }

// LegacyAuditFilter matches an older esjet's audit record subjects and no
// audit record of today's.
func LegacyAuditFilter(ns string) string { return ns + ".dlq.audit.*" }

// HeaderDLQMigrated marks the message that empties an older subject once
// its letters or audit records were copied to today's subjects.
const HeaderDLQMigrated = "Esjet-Dlq-Migrated"

// LegacyMark replaces the newest message of an older DLQ subject once the
// DLQ keeps one message per subject; publish it with a TTL of
// [SettleMarkTTL], after which the subject holds nothing.
func LegacyMark(subject string) *nats.Msg {
	return &nats.Msg{Subject: subject, Header: nats.Header{HeaderDLQMigrated: {"true"}}}
}

// IsLegacyMark reports whether a message on an older subject is the mark
// that empties it.
func IsLegacyMark(h nats.Header) bool { return h.Get(HeaderDLQMigrated) != "" }

// LegacyAudit is what the copy of an older audit record needs of it: the
// DLQ sequence of the letter it settled and the action.
type LegacyAudit struct {
	DLQSeq uint64 `json:"dlq_seq"`
	Action string `json:"action"`
}

// DecodeLegacyAudit reads an audit record's letter sequence and action.
func DecodeLegacyAudit(data []byte) (LegacyAudit, bool) {
	var a LegacyAudit
	if json.Unmarshal(data, &a) != nil || a.DLQSeq == 0 || a.Action == "" {
		return LegacyAudit{}, false
	}
	return a, true
}

// MigratedLetterMsg is the copy of the older dead letter m on its own
// subject: its headers (but Nats-*) and body, and a message id of its own
// (the letter's id may still be in the dedup window).
func MigratedLetterMsg(ns string, m *jetstream.RawStreamMsg) *nats.Msg {
	dl := DecodeDeadLetter(m)
	out := &nats.Msg{Subject: DeadLetterSubject(ns, dl.Kind, dl.OutboxSeq), Header: copyCarried(m.Header, 1), Data: m.Data}
	out.Header[jetstream.MsgIDHeader] = []string{"migrated:" + strconv.FormatUint(m.Sequence, 10)}
	return out
}

// MigratedAuditMsg is the copy of the older audit record a (of a letter of
// kind) on today's subject.
func MigratedAuditMsg(ns, kind string, a *jetstream.RawStreamMsg, rec LegacyAudit) *nats.Msg {
	out := &nats.Msg{Subject: AuditSubject(ns, kind, rec.DLQSeq), Header: copyCarried(a.Header, 1), Data: a.Data}
	out.Header[jetstream.MsgIDHeader] = []string{"migrated-audit:" + strconv.FormatUint(rec.DLQSeq, 10)}
	return out
}

func copyCarried(h nats.Header, extra int) nats.Header {
	out := make(nats.Header, len(h)+extra)
	for k, vs := range h {
		if carried(k) {
			out[k] = append([]string(nil), vs...)
		}
	}
	return out
}

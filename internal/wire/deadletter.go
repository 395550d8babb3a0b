package wire

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// maxErrorLen caps HeaderError: a header is not the place for a stack trace.
const maxErrorLen = 1024

// redriveInfix marks a re-driven copy's Nats-Msg-Id: <command id>:redrive:<dlq seq>.
const redriveInfix = ":redrive:"

// DeadLetter is one entry of the DLQ, as [DecodeDeadLetter] reads it.
type DeadLetter struct {
	Seq  uint64 `json:"seq"` // DLQ stream sequence
	ID   string `json:"command_id"`
	Kind string `json:"kind"`
	// Error is the last attempt's error; Attempts how many times the
	// handler ran; Worker the worker that gave up.
	Error    string    `json:"error"`
	Attempts int       `json:"attempts"`
	Worker   string    `json:"worker"`
	DeadAt   time.Time `json:"dead_at"` // Esjet-Dead-At, else the time it was stored
	// OutboxSeq is the OUTBOX sequence of the copy that failed.
	OutboxSeq        uint64 `json:"outbox_seq,omitempty"`
	AggregateType    string `json:"aggregate_type,omitempty"`
	AggregateID      string `json:"aggregate_id,omitempty"`
	AggregateVersion uint64 `json:"aggregate_version,omitempty"`
	DecisionID       string `json:"decision_id,omitempty"`
	DecisionSeq      uint64 `json:"decision_seq,omitempty"`
	CorrelationID    string `json:"correlation_id,omitempty"`
	// Payload is the command's payload: its JSON, or (for a payload that
	// is not JSON, e.g. a poison message) a JSON string of its bytes with
	// PayloadNotJSON set.
	Payload        json.RawMessage `json:"payload"`
	PayloadNotJSON bool            `json:"payload_not_json,omitempty"`
	Header         nats.Header     `json:"headers"`
}

// DeadLetterMsgID is a dead letter's Nats-Msg-Id: one entry per delivered
// OUTBOX copy, so a worker that crashes between the DLQ write and its term
// does not write a second one, while a re-driven copy (a new OUTBOX
// sequence) that fails again does.
func DeadLetterMsgID(commandID string, outboxSeq uint64) string {
	return "dlq:" + commandID + ":" + strconv.FormatUint(outboxSeq, 10)
}

// RedriveMsgID is the Nats-Msg-Id of a command re-driven from the DLQ entry
// at dlqSeq. It is never the command id itself: OUTBOX would drop that as a
// duplicate inside its window, and after it a re-drive must not pass for
// the relay's copy.
func RedriveMsgID(commandID string, dlqSeq uint64) string {
	return commandID + redriveInfix + strconv.FormatUint(dlqSeq, 10)
}

// IsRedrive reports whether an OUTBOX copy of commandID with Nats-Msg-Id
// msgID is a re-drive from the DLQ (not the relay's copy).
func IsRedrive(commandID, msgID string) bool {
	return strings.HasPrefix(msgID, commandID+redriveInfix)
}

// DeadLetterMsg builds the DLQ entry of an OUTBOX message a worker gives up
// on: delivered as the worker got it (headers and body), its OUTBOX stream
// sequence, the last error (reduced to one line), how many times the
// handler ran, the worker's name and the time. The body is the command
// payload unchanged; the headers are every Esjet-* header of delivered
// (plus traceparent, tracestate and Content-Type) and the dead-letter
// headers. Publish it with the JetStream API and wait for the ack before
// terminating the delivery. [DecodeDeadLetter] reads it back.
func DeadLetterMsg(ns string, delivered *nats.Msg, outboxSeq uint64, reason string, attempts int, worker string, at time.Time) *nats.Msg {
	h := make(nats.Header, len(delivered.Header)+8)
	for k, vs := range delivered.Header {
		if carried(k) {
			h[k] = append([]string(nil), vs...)
		}
	}
	id := delivered.Header.Get(HeaderCommandID)
	if id == "" {
		id = delivered.Header.Get(jetstream.MsgIDHeader)
	}
	kind := delivered.Header.Get(HeaderCommandKind)
	if kind == "" {
		kind = KindOfCommandSubject(ns, delivered.Subject)
	}
	if kind == "" {
		kind = delivered.Subject[strings.LastIndexByte(delivered.Subject, '.')+1:]
	}
	h[HeaderError] = []string{OneLine(reason)}
	h[HeaderAttempts] = []string{strconv.Itoa(attempts)}
	h[HeaderWorker] = []string{OneLine(worker)}
	h[HeaderDeadAt] = []string{at.UTC().Format(time.RFC3339Nano)}
	h[HeaderOutboxSeq] = []string{strconv.FormatUint(outboxSeq, 10)}
	h[jetstream.MsgIDHeader] = []string{DeadLetterMsgID(id, outboxSeq)}
	return &nats.Msg{Subject: DeadLetterSubject(ns, kind, outboxSeq), Header: h, Data: delivered.Data}
}

// DeadFence is the fence the dead letter's command died with (0 for a
// letter written before it was recorded, or by a producer that did not).
func DeadFence(m *jetstream.RawStreamMsg) uint64 {
	f, _ := strconv.ParseUint(m.Header.Get(HeaderDeadFence), 10, 64)
	return f
}

// DecodeDeadLetter reads a dead letter stored by [DeadLetterMsg]. It never
// fails: a header that is missing or does not parse reads as zero (the kind
// falls back to the subject's last token, the time of death to the time it
// was stored), so an operator can still see and act on any entry.
func DecodeDeadLetter(m *jetstream.RawStreamMsg) DeadLetter {
	h := m.Header
	dl := DeadLetter{
		Seq: m.Sequence, ID: h.Get(HeaderCommandID), Kind: h.Get(HeaderCommandKind),
		Error: h.Get(HeaderError), Worker: h.Get(HeaderWorker),
		AggregateType: h.Get(HeaderAggregateType), AggregateID: h.Get(HeaderAggregateID),
		DecisionID: h.Get(HeaderDecisionID), CorrelationID: h.Get(HeaderCorrelationID),
		Header: h,
	}
	if dl.Kind == "" {
		dl.Kind = kindOfLetter(m.Subject)
	}
	dl.Attempts, _ = strconv.Atoi(h.Get(HeaderAttempts))
	dl.OutboxSeq, _ = strconv.ParseUint(h.Get(HeaderOutboxSeq), 10, 64)
	dl.AggregateVersion, _ = strconv.ParseUint(h.Get(HeaderVersion), 10, 64)
	dl.DecisionSeq, _ = strconv.ParseUint(h.Get(HeaderDecisionSeq), 10, 64)
	if t, err := time.Parse(time.RFC3339Nano, h.Get(HeaderDeadAt)); err == nil {
		dl.DeadAt = t.UTC()
	} else {
		dl.DeadAt = m.Time.UTC()
	}
	switch {
	case len(m.Data) == 0:
		dl.Payload = json.RawMessage("null")
	case json.Valid(m.Data):
		dl.Payload = json.RawMessage(m.Data)
	default:
		s, _ := json.Marshal(string(m.Data))
		dl.Payload, dl.PayloadNotJSON = s, true
	}
	return dl
}

// RedriveMsg builds the OUTBOX copy of the dead letter m (stored at DLQ
// sequence m.Sequence): on the kind's command subject of band priority
// ([BandSubject]), with the entry's headers and body — the same
// Esjet-Command-Id, so receivers still dedupe — without the dead-letter
// headers, with fence base fenceBase ([HeaderFenceBase]; at least the
// fence the command died with, [DeadFence]) and Nats-Msg-Id
// [RedriveMsgID].
func RedriveMsg(ns string, m *jetstream.RawStreamMsg, priority string, fenceBase uint64) *nats.Msg {
	dl := DecodeDeadLetter(m)
	out := &nats.Msg{Subject: BandSubject(ns, dl.Kind, priority), Header: make(nats.Header, len(m.Header)), Data: m.Data}
	for k, vs := range m.Header {
		if carried(k) {
			out.Header[k] = append([]string(nil), vs...)
		}
	}
	for _, k := range dlqOnly {
		delete(out.Header, k)
	}
	delete(out.Header, HeaderPriority)
	delete(out.Header, HeaderFenceBase)
	if priority != PriorityNormal {
		out.Header[HeaderPriority] = []string{priority}
	}
	if fenceBase > 0 {
		out.Header[HeaderFenceBase] = []string{strconv.FormatUint(fenceBase, 10)}
	}
	out.Header[jetstream.MsgIDHeader] = []string{RedriveMsgID(dl.ID, dl.Seq)}
	return out
}

// kindOfLetter is the kind token of a dead letter's or a settled letter's
// subject (<ns>.dlq.letter|settled.<kind>.<seq>), else its last token (an
// older esjet's <ns>.dlq.<kind>).
func kindOfLetter(subject string) string {
	tok := strings.Split(subject, ".")
	if n := len(tok); n >= 5 && (tok[n-3] == "letter" || tok[n-3] == "settled") {
		return tok[n-2]
	}
	return tok[len(tok)-1]
}

// SettleMarkTTL is how long the mark that replaces a settled dead letter
// stays (JetStream's shortest per-message TTL): after it the letter's
// subject holds nothing.
const SettleMarkTTL = time.Second

// SettleMark is what replaces the dead letter at dlqSeq on its subject
// once it is settled by action: no body, the action and the sequence it
// settles. Publish it with a TTL of [SettleMarkTTL] and dlqSeq as the
// subject's expected last sequence (the DLQ keeps one message per
// subject): then no one else settled it first, and the subject empties.
func SettleMark(letterSubject, action string, dlqSeq uint64) *nats.Msg {
	seq := strconv.FormatUint(dlqSeq, 10)
	return &nats.Msg{Subject: letterSubject, Header: nats.Header{
		HeaderDLQAction:       {action},
		HeaderDLQSeq:          {seq},
		jetstream.MsgIDHeader: {"settle:" + seq},
	}}
}

// IsSettleMark reports whether a message read on a dead letter's subject
// ([IsDeadLetterSubject]) is the mark of a settled letter, not a letter.
// (Audit records and settled copies carry the action too: ask only of a
// dead letter's subject.)
func IsSettleMark(h nats.Header) bool { return h.Get(HeaderDLQAction) != "" }

// SettledMsg is the copy of the dead letter m, settled by action, kept on
// [SettledSubject] until the TTL it is published with: its headers and
// body, the action and the DLQ sequence it had. [DecodeSettled] reads it.
func SettledMsg(ns string, m *jetstream.RawStreamMsg, action string) *nats.Msg {
	dl := DecodeDeadLetter(m)
	out := &nats.Msg{Subject: SettledSubject(ns, dl.Kind, m.Sequence), Header: make(nats.Header, len(m.Header)+3), Data: m.Data}
	for k, vs := range m.Header {
		if carried(k) {
			out.Header[k] = append([]string(nil), vs...)
		}
	}
	seq := strconv.FormatUint(m.Sequence, 10)
	out.Header[HeaderDLQAction] = []string{action}
	out.Header[HeaderDLQSeq] = []string{seq}
	out.Header[jetstream.MsgIDHeader] = []string{"settled:" + seq}
	return out
}

// DecodeSettled reads a settled letter stored by [SettledMsg]: the dead
// letter as it was (its DLQ sequence the one it had) and the action that
// settled it.
func DecodeSettled(m *jetstream.RawStreamMsg) (DeadLetter, string) {
	dl := DecodeDeadLetter(m)
	dl.Seq, _ = strconv.ParseUint(m.Header.Get(HeaderDLQSeq), 10, 64)
	return dl, m.Header.Get(HeaderDLQAction)
}

// carried says whether a header of an OUTBOX message travels with it into
// the DLQ and back: esjet's own, trace context and content type; never
// Nats-* (message ids, schedules), which belong to one stream.
func carried(k string) bool {
	l := strings.ToLower(k)
	return strings.HasPrefix(l, "esjet-") || l == "traceparent" || l == "tracestate" || l == "content-type"
}

// dlqOnly are the headers a dead letter adds; a re-drive drops them.
var dlqOnly = []string{HeaderError, HeaderAttempts, HeaderWorker, HeaderDeadAt, HeaderOutboxSeq, HeaderDeadFence}

// OneLine makes s a valid one-line header value: control characters
// become spaces, runs of space collapse, and it is capped at maxErrorLen.
// Workers use it for the error they record in receipts and dead letters,
// so both say the same thing.
func OneLine(s string) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	if len(s) > maxErrorLen {
		cut := maxErrorLen
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
)

// Dead letters live in <NS>_DLQ on <ns>.dlq.<kind> (three tokens). Every
// retry or discard first writes an audit record to the same stream on
// <ns>.dlq.audit.<kind> (four tokens), then removes the dead letter: nothing
// leaves the DLQ without a trace. Readers tell them apart by subject:
// [DeadLetterFilter] and [AuditFilter], never <ns>.dlq.> (which holds both).

// Headers of a dead letter, beside [HeaderError], [HeaderAttempts],
// [HeaderWorker] and the OUTBOX message's own Esjet-* headers.
const (
	HeaderDeadAt    = "Esjet-Dead-At"    // when the worker gave up, RFC 3339 with nanoseconds
	HeaderOutboxSeq = "Esjet-Outbox-Seq" // OUTBOX sequence of the delivered copy
	// HeaderDLQAction is the action ([AuditRetried], [AuditDiscarded]) of
	// an audit record.
	HeaderDLQAction = "Esjet-Dlq-Action"
)

// Audit actions.
const (
	AuditRetried   = "retried"   // re-driven into OUTBOX
	AuditDiscarded = "discarded" // dropped by an operator, with a reason
)

// maxErrorLen caps HeaderError: a header is not the place for a stack trace.
const maxErrorLen = 1024

// redriveInfix marks a re-driven copy's Nats-Msg-Id: <command id>:redrive:<dlq seq>.
const redriveInfix = ":redrive:"

var (
	// ErrDeadLetterNotFound means the DLQ holds no dead letter for the
	// command id or at the sequence (it was never dead, or was retried or
	// discarded already).
	ErrDeadLetterNotFound = errors.New("outbox: dead letter not found")
	// ErrReasonRequired means a discard was asked for without a reason.
	ErrReasonRequired = errors.New("outbox: a discard needs a reason")
)

// DeadLetterSubject is where dead letters of kind are stored.
func DeadLetterSubject(ns, kind string) string { return ns + ".dlq." + kind }

// AuditSubject is where the audit records of kind's dead letters are stored.
func AuditSubject(ns, kind string) string { return ns + ".dlq.audit." + kind }

// DeadLetterFilter matches every dead letter of namespace ns, and no audit
// record.
func DeadLetterFilter(ns string) string { return ns + ".dlq.*" }

// AuditFilter matches every audit record of namespace ns.
func AuditFilter(ns string) string { return ns + ".dlq.audit.*" }

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

func auditMsgID(action string, dlqSeq uint64) string {
	return "audit:" + action + ":" + strconv.FormatUint(dlqSeq, 10)
}

// DeadLetterMsg builds the DLQ entry of an OUTBOX message a worker gives up
// on: delivered as the worker got it (headers and body), its OUTBOX stream
// sequence, the last error (reduced to one line), how many times the
// handler ran, the worker's name and the time. The body is the command
// payload unchanged; the headers are every Esjet-* header of delivered
// (plus traceparent, tracestate and Content-Type) and the dead-letter
// headers. Publish it with the JetStream API and wait for the ack before
// terminating the delivery.
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
		kind = delivered.Subject[strings.LastIndexByte(delivered.Subject, '.')+1:]
	}
	h[HeaderError] = []string{OneLine(reason)}
	h[HeaderAttempts] = []string{strconv.Itoa(attempts)}
	h[HeaderWorker] = []string{OneLine(worker)}
	h[HeaderDeadAt] = []string{at.UTC().Format(time.RFC3339Nano)}
	h[HeaderOutboxSeq] = []string{strconv.FormatUint(outboxSeq, 10)}
	h[jetstream.MsgIDHeader] = []string{DeadLetterMsgID(id, outboxSeq)}
	return &nats.Msg{Subject: DeadLetterSubject(ns, kind), Header: h, Data: delivered.Data}
}

// carried says whether a header of an OUTBOX message travels with it into
// the DLQ and back: esjet's own, trace context and content type; never
// Nats-* (message ids, schedules), which belong to one stream.
func carried(k string) bool {
	l := strings.ToLower(k)
	return strings.HasPrefix(l, "esjet-") || l == "traceparent" || l == "tracestate" || l == "content-type"
}

// dlqOnly are the headers a dead letter adds; a re-drive drops them.
var dlqOnly = []string{HeaderError, HeaderAttempts, HeaderWorker, HeaderDeadAt, HeaderOutboxSeq}

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

// DeadLetter is one entry of the DLQ.
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

// AuditRecord is what a retry or discard leaves in the DLQ stream on
// <ns>.dlq.audit.<kind>, written before the dead letter is removed.
type AuditRecord struct {
	// Seq is the record's own DLQ stream sequence (filled on read).
	Seq       uint64 `json:"seq,omitempty"`
	Action    string `json:"action"` // AuditRetried or AuditDiscarded
	CommandID string `json:"command_id"`
	Kind      string `json:"kind"`
	// DLQSeq is the sequence of the dead letter acted on.
	DLQSeq uint64 `json:"dlq_seq"`
	// Reason is why it was discarded (discards only).
	Reason string `json:"reason,omitempty"`
	// NewOutboxMsgID and NewOutboxSeq are the re-driven copy's (retries only).
	NewOutboxMsgID string    `json:"new_outbox_msg_id,omitempty"`
	NewOutboxSeq   uint64    `json:"new_outbox_seq,omitempty"`
	By             string    `json:"by"`
	At             time.Time `json:"at"`
	// Error and Attempts are the dead letter's.
	Error    string `json:"error"`
	Attempts int    `json:"attempts"`
}

// Filter selects dead letters in [DLQ.List]. The zero value selects all.
type Filter struct {
	Kind string // one command kind; "" means every kind
	// ErrorContains keeps entries whose error contains this text, ignoring
	// case; "" keeps all.
	ErrorContains string
	OlderThan     time.Duration // dead at least this long ago; 0: no bound
	NewerThan     time.Duration // dead at most this long ago; 0: no bound
}

// DeadLetterDetail is one dead letter with what happened to its command in
// the DLQ before.
type DeadLetterDetail struct {
	DeadLetter
	// History are the command's audit records, oldest first (earlier
	// dead letters retried or discarded).
	History []AuditRecord `json:"history"`
	// OtherSeqs are other dead letters of the same command still in the DLQ.
	OtherSeqs []uint64 `json:"other_seqs,omitempty"`
}

// DLQ reads and acts on one namespace's dead letters. It is safe for
// concurrent use; two operators acting on one entry at once leave one
// re-drive and one audit record when they do it inside the streams' dedup
// windows, and at worst a repeated (harmless) record outside them.
type DLQ struct {
	js    jetstream.JetStream
	names streams.Names
	batch int
	now   func() time.Time
}

// OpenDLQ returns the DLQ of namespace ns. It does no I/O.
func OpenDLQ(js jetstream.JetStream, ns string) *DLQ {
	return &DLQ{js: js, names: streams.NamesFor(ns), batch: 1000, now: time.Now}
}

// List returns the dead letters that pass f, oldest first.
func (d *DLQ) List(ctx context.Context, f Filter) ([]DeadLetter, error) {
	rng := streams.ScanRange{Filter: DeadLetterFilter(d.names.Namespace)}
	if f.Kind != "" {
		subj, err := d.names.DLQSubject(f.Kind)
		if err != nil {
			return nil, err
		}
		rng.Filter = subj
	}
	if f.OlderThan < 0 || f.NewerThan < 0 {
		return nil, fmt.Errorf("dlq list: ages must not be negative (older than %s, newer than %s)", f.OlderThan, f.NewerThan)
	}
	now := d.now()
	if f.NewerThan > 0 {
		// Stored time and Esjet-Dead-At come from two clocks: start early,
		// filter exactly below.
		rng.Since = now.Add(-f.NewerThan - clockSkew)
	}
	text := strings.ToLower(f.ErrorContains)
	out := []DeadLetter{}
	err := d.scan(ctx, rng, func(m *jetstream.RawStreamMsg) error {
		dl := deadLetterFrom(m)
		age := now.Sub(dl.DeadAt)
		switch {
		case f.OlderThan > 0 && age < f.OlderThan:
		case f.NewerThan > 0 && age > f.NewerThan:
		case text != "" && !strings.Contains(strings.ToLower(dl.Error), text):
		default:
			out = append(out, dl)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dlq list: %w", err)
	}
	return out, nil
}

// Get finds one dead letter: by DLQ stream sequence when idOrSeq is a
// number, else by command id (the newest entry of that command). It
// returns an error wrapping [ErrDeadLetterNotFound] when there is none,
// saying what became of it when the audit trail knows.
func (d *DLQ) Get(ctx context.Context, idOrSeq string) (DeadLetter, error) {
	dl, _, err := d.get(ctx, idOrSeq)
	return dl, err
}

// Show is [DLQ.Get] with the command's audit history.
func (d *DLQ) Show(ctx context.Context, idOrSeq string) (DeadLetterDetail, error) {
	dl, others, err := d.get(ctx, idOrSeq)
	if err != nil {
		return DeadLetterDetail{}, err
	}
	hist, err := d.History(ctx, dl.ID, dl.Kind)
	if err != nil {
		return DeadLetterDetail{}, err
	}
	return DeadLetterDetail{DeadLetter: dl, History: hist, OtherSeqs: others}, nil
}

// History returns command id's audit records, oldest first. kind narrows
// the scan; "" scans every kind.
func (d *DLQ) History(ctx context.Context, id, kind string) ([]AuditRecord, error) {
	return d.audits(ctx, kind, func(a AuditRecord) bool { return a.CommandID == id })
}

func (d *DLQ) get(ctx context.Context, idOrSeq string) (DeadLetter, []uint64, error) {
	if seq, err := strconv.ParseUint(idOrSeq, 10, 64); err == nil {
		dl, err := d.bySeq(ctx, seq)
		return dl, nil, err
	}
	id := idOrSeq
	if _, err := ParseCommandID(id); err != nil {
		return DeadLetter{}, nil, fmt.Errorf("%w (or a DLQ sequence number)", err)
	}
	var found []DeadLetter
	err := d.scan(ctx, streams.ScanRange{Filter: DeadLetterFilter(d.names.Namespace)}, func(m *jetstream.RawStreamMsg) error {
		if m.Header.Get(HeaderCommandID) == id {
			found = append(found, deadLetterFrom(m))
		}
		return nil
	})
	if err != nil {
		return DeadLetter{}, nil, fmt.Errorf("dlq: find %s: %w", id, err)
	}
	if len(found) == 0 {
		return DeadLetter{}, nil, d.notFound(ctx, "command "+id, func(a AuditRecord) bool { return a.CommandID == id })
	}
	newest := found[len(found)-1]
	var others []uint64
	for _, dl := range found[:len(found)-1] {
		others = append(others, dl.Seq)
	}
	return newest, others, nil
}

func (d *DLQ) bySeq(ctx context.Context, seq uint64) (DeadLetter, error) {
	st, err := d.stream(ctx)
	if err != nil {
		return DeadLetter{}, err
	}
	m, err := st.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return DeadLetter{}, d.notFound(ctx, fmt.Sprintf("seq %d", seq), func(a AuditRecord) bool { return a.DLQSeq == seq })
	}
	if err != nil {
		return DeadLetter{}, fmt.Errorf("dlq: seq %d: %w", seq, err)
	}
	if !d.isDeadLetter(m.Subject) {
		return DeadLetter{}, fmt.Errorf("%w: seq %d of %s is %s (an audit record), not a dead letter; `esjet dlq ls` lists the dead letters", ErrDeadLetterNotFound, seq, d.names.DLQ, m.Subject)
	}
	return deadLetterFrom(m), nil
}

// notFound is ErrDeadLetterNotFound for what, with the last audit record
// that matches when there is one.
func (d *DLQ) notFound(ctx context.Context, what string, match func(AuditRecord) bool) error {
	recs, err := d.audits(ctx, "", match)
	if err != nil || len(recs) == 0 {
		return fmt.Errorf("%w: no dead letter for %s in %s", ErrDeadLetterNotFound, what, d.names.DLQ)
	}
	a := recs[len(recs)-1]
	return fmt.Errorf("%w: no dead letter for %s in %s; it was %s by %s at %s (audit seq %d)",
		ErrDeadLetterNotFound, what, d.names.DLQ, a.Action, a.By, a.At.Format(time.RFC3339), a.Seq)
}

func (d *DLQ) isDeadLetter(subject string) bool {
	rest, ok := strings.CutPrefix(subject, d.names.Namespace+".dlq.")
	return ok && rest != "" && !strings.Contains(rest, ".")
}

// Retry re-drives dead letter dl into OUTBOX and returns the new copy's
// Nats-Msg-Id. In order, each step safe to repeat after a crash:
//  1. re-read the entry (it must still be in the DLQ);
//  2. delete the command's receipt if it says failed (guarded by its
//     revision), so the re-driven command runs and records a new outcome;
//  3. publish to <ns>.outbox.<kind> with the entry's headers and body —
//     the same Esjet-Command-Id, so receivers still dedupe — and
//     Nats-Msg-Id [RedriveMsgID], and wait for OUTBOX's ack;
//  4. write the audit record (action retried);
//  5. delete the entry.
//
// by names the operator; "" means [Operator].
func (d *DLQ) Retry(ctx context.Context, dl DeadLetter, by string) (string, error) {
	m, err := d.reread(ctx, dl)
	if err != nil {
		return "", fmt.Errorf("retry: %w", err)
	}
	cur := deadLetterFrom(m)
	if err := d.clearFailedReceipt(ctx, cur.ID); err != nil {
		return "", fmt.Errorf("retry %s: %w", cur.ID, err)
	}
	out := &nats.Msg{Subject: CommandSubject(d.names.Namespace, cur.Kind), Header: make(nats.Header, len(m.Header)), Data: m.Data}
	for k, vs := range m.Header {
		if carried(k) {
			out.Header[k] = append([]string(nil), vs...)
		}
	}
	for _, k := range dlqOnly {
		delete(out.Header, k)
	}
	msgID := RedriveMsgID(cur.ID, cur.Seq)
	out.Header[jetstream.MsgIDHeader] = []string{msgID}
	ack, err := d.js.PublishMsg(ctx, out, jetstream.WithExpectStream(d.names.Outbox))
	if err != nil {
		return "", fmt.Errorf("retry %s: publish to %s: %w", cur.ID, out.Subject, err)
	}
	rec := AuditRecord{Action: AuditRetried, NewOutboxMsgID: msgID, NewOutboxSeq: ack.Sequence}
	if err := d.settle(ctx, cur, rec, by); err != nil {
		return msgID, fmt.Errorf("retry %s: re-driven to OUTBOX (seq %d), then: %w", cur.ID, ack.Sequence, err)
	}
	return msgID, nil
}

// Discard removes dead letter dl for good, after writing an audit record
// with reason. An empty reason is [ErrReasonRequired] and removes nothing.
// by names the operator; "" means [Operator].
func (d *DLQ) Discard(ctx context.Context, dl DeadLetter, reason, by string) error {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return fmt.Errorf("discard seq %d (%s): %w: say why (it is kept in the audit record)", dl.Seq, dl.ID, ErrReasonRequired)
	}
	m, err := d.reread(ctx, dl)
	if err != nil {
		return fmt.Errorf("discard: %w", err)
	}
	if err := d.settle(ctx, deadLetterFrom(m), AuditRecord{Action: AuditDiscarded, Reason: reason}, by); err != nil {
		return fmt.Errorf("discard %s: %w", dl.ID, err)
	}
	return nil
}

// reread fetches dl again: it must still be a dead letter of the same
// command.
func (d *DLQ) reread(ctx context.Context, dl DeadLetter) (*jetstream.RawStreamMsg, error) {
	if dl.Seq == 0 {
		return nil, fmt.Errorf("%w: no DLQ sequence given", ErrDeadLetterNotFound)
	}
	st, err := d.stream(ctx)
	if err != nil {
		return nil, err
	}
	m, err := st.GetMsg(ctx, dl.Seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, d.notFound(ctx, fmt.Sprintf("seq %d", dl.Seq), func(a AuditRecord) bool { return a.DLQSeq == dl.Seq })
	}
	if err != nil {
		return nil, fmt.Errorf("seq %d: %w", dl.Seq, err)
	}
	if !d.isDeadLetter(m.Subject) || (dl.ID != "" && m.Header.Get(HeaderCommandID) != dl.ID) {
		return nil, fmt.Errorf("%w: seq %d of %s is not a dead letter of %s", ErrDeadLetterNotFound, dl.Seq, d.names.DLQ, dl.ID)
	}
	return m, nil
}

// settle writes the audit record of cur, then deletes cur.
func (d *DLQ) settle(ctx context.Context, cur DeadLetter, rec AuditRecord, by string) error {
	if by == "" {
		by = Operator()
	}
	rec.CommandID, rec.Kind, rec.DLQSeq = cur.ID, cur.Kind, cur.Seq
	rec.By, rec.At = by, d.now().UTC()
	rec.Error, rec.Attempts = cur.Error, cur.Attempts
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	am := &nats.Msg{Subject: AuditSubject(d.names.Namespace, cur.Kind), Data: data, Header: nats.Header{
		HeaderCommandID:       {cur.ID},
		HeaderCommandKind:     {cur.Kind},
		HeaderDLQAction:       {rec.Action},
		"Content-Type":        {"application/json"},
		jetstream.MsgIDHeader: {auditMsgID(rec.Action, cur.Seq)},
	}}
	if _, err := d.js.PublishMsg(ctx, am, jetstream.WithExpectStream(d.names.DLQ)); err != nil {
		return fmt.Errorf("audit record on %s: %w (the dead letter is still there)", am.Subject, err)
	}
	st, err := d.stream(ctx)
	if err != nil {
		return err
	}
	if err := st.DeleteMsg(ctx, cur.Seq); err != nil {
		// Someone else removed it meanwhile: the outcome is the same.
		if _, gerr := st.GetMsg(ctx, cur.Seq); errors.Is(gerr, jetstream.ErrMsgNotFound) {
			return nil
		}
		return fmt.Errorf("delete dead letter seq %d (audit recorded; run it again): %w", cur.Seq, err)
	}
	return nil
}

// clearFailedReceipt deletes id's receipt when its outcome is failed. A
// receipt that says done is left alone (the worker folds the re-drive).
func (d *DLQ) clearFailedReceipt(ctx context.Context, id string) error {
	kv, err := d.js.KeyValue(ctx, d.names.Receipts)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("receipts: %w", err)
	}
	e, err := kv.Get(ctx, ReceiptKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("receipt %s: %w", ReceiptKey(id), err)
	}
	var rc Receipt
	if json.Unmarshal(e.Value(), &rc) == nil && rc.Outcome != OutcomeFailed {
		return nil
	}
	if err := kv.Delete(ctx, ReceiptKey(id), jetstream.LastRevision(e.Revision())); err != nil {
		return fmt.Errorf("clear failed receipt %s: %w", ReceiptKey(id), err)
	}
	return nil
}

// audits returns the audit records of kind ("" every kind) that match,
// oldest first.
func (d *DLQ) audits(ctx context.Context, kind string, match func(AuditRecord) bool) ([]AuditRecord, error) {
	filter := AuditFilter(d.names.Namespace)
	if kind != "" {
		filter = AuditSubject(d.names.Namespace, kind)
	}
	out := []AuditRecord{}
	err := d.scan(ctx, streams.ScanRange{Filter: filter}, func(m *jetstream.RawStreamMsg) error {
		var a AuditRecord
		if json.Unmarshal(m.Data, &a) != nil {
			return nil
		}
		a.Seq = m.Sequence
		if match(a) {
			out = append(out, a)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dlq audit: %w", err)
	}
	return out, nil
}

func (d *DLQ) stream(ctx context.Context) (jetstream.Stream, error) {
	st, err := d.js.Stream(ctx, d.names.DLQ)
	if err != nil {
		return nil, fmt.Errorf("dlq %s: %w (start the node once to provision it)", d.names.DLQ, err)
	}
	return st, nil
}

func (d *DLQ) scan(ctx context.Context, rng streams.ScanRange, fn func(*jetstream.RawStreamMsg) error) error {
	if _, err := d.stream(ctx); err != nil {
		return err
	}
	sc := streams.NewScanner(d.js, d.names.DLQ, d.batch)
	defer sc.Close()
	_, err := sc.Scan(ctx, rng, fn)
	return err
}

// deadLetterFrom reads a dead letter's headers.
func deadLetterFrom(m *jetstream.RawStreamMsg) DeadLetter {
	h := m.Header
	dl := DeadLetter{
		Seq: m.Sequence, ID: h.Get(HeaderCommandID), Kind: h.Get(HeaderCommandKind),
		Error: h.Get(HeaderError), Worker: h.Get(HeaderWorker),
		AggregateType: h.Get(HeaderAggregateType), AggregateID: h.Get(HeaderAggregateID),
		DecisionID: h.Get(HeaderDecisionID), CorrelationID: h.Get(HeaderCorrelationID),
		Header: h,
	}
	if dl.Kind == "" {
		dl.Kind = m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
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

// Operator names who runs a DLQ action: $USER@host, else the OS user.
func Operator() string {
	name := os.Getenv("USER")
	if name == "" {
		name = os.Getenv("LOGNAME")
	}
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	if name == "" {
		name = "unknown"
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		return name + "@" + host
	}
	return name
}

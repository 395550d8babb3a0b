package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Retry re-drives dead letter dl into OUTBOX and returns the new copy's
// Nats-Msg-Id. In order, each step safe to repeat after a crash:
//  1. re-read the entry (it must still be in the DLQ), and, unless mode is
//     [RetryAfterReportedFailure], refuse with a [*ReportedFailureError]
//     when the command's aggregate was already told <kind>_failed: it may
//     have compensated, and an effect that now succeeds would never be
//     taken into account;
//  2. delete the command's receipt if it says failed (guarded by its
//     revision), so the re-driven command runs and records a new outcome;
//  3. publish [wire.RedriveMsg] to <ns>.outbox.<kind>.low — low
//     priority, so a bulk re-drive does not delay live commands (see
//     [DLQ.RetryAt]); the entry's headers and body, the same
//     Esjet-Command-Id, so receivers still dedupe, a fence base above every
//     fence the command had, and Nats-Msg-Id [wire.RedriveMsgID] — and wait
//     for OUTBOX's ack;
//  4. settle the entry ([DLQ.settle]): its audit record (action retried),
//     its whole copy kept for streams.dlq_settled_max_age, and the mark
//     that takes its place.
//
// by names the operator; "" means [Operator].
func (d *DLQ) Retry(ctx context.Context, dl DeadLetter, by string, mode RetryMode) (string, error) {
	return d.RetryAt(ctx, dl, by, mode, wire.PriorityLow)
}

// RetryAt is [DLQ.Retry] with the re-driven command in band priority
// (wire.PriorityHigh, PriorityNormal or PriorityLow).
func (d *DLQ) RetryAt(ctx context.Context, dl DeadLetter, by string, mode RetryMode, priority string) (string, error) {
	priority, err := wire.NormalPriority(priority)
	if err != nil {
		return "", fmt.Errorf("retry seq %d (%s): %w", dl.Seq, dl.ID, err)
	}
	m, err := d.reread(ctx, dl)
	if err != nil {
		return "", fmt.Errorf("retry: %w", err)
	}
	cur := wire.DecodeDeadLetter(m)
	if mode&RetryAfterReportedFailure == 0 {
		if err := d.refuseIfToldFailed(ctx, cur); err != nil {
			return "", err
		}
	}
	if mode&RetryPastReceipts == 0 {
		if err := d.refuseIfPastReceipts(ctx, cur); err != nil {
			return "", err
		}
	}
	if err := d.clearFailedReceipt(ctx, cur.ID); err != nil {
		return "", fmt.Errorf("retry %s: %w", cur.ID, err)
	}
	base, err := d.fenceBase(ctx, cur.Kind, m)
	if err != nil {
		return "", fmt.Errorf("retry %s: %w", cur.ID, err)
	}
	out := wire.RedriveMsg(d.names.Namespace, m, priority, base)
	msgID := out.Header.Get(jetstream.MsgIDHeader)
	ack, err := d.js.PublishMsg(ctx, out, jetstream.WithExpectStream(d.names.Outbox))
	if err != nil {
		return "", fmt.Errorf("retry %s: publish to %s: %w", cur.ID, out.Subject, err)
	}
	rec := AuditRecord{Action: AuditRetried, NewOutboxMsgID: msgID, NewOutboxSeq: ack.Sequence}
	if err := d.settle(ctx, m, rec, by); err != nil {
		return msgID, fmt.Errorf("retry %s: re-driven to OUTBOX (seq %d), then: %w", cur.ID, ack.Sequence, err)
	}
	return msgID, nil
}

// Discard settles dead letter dl for good ([DLQ.settle]) with an audit
// record carrying reason. An empty reason is [ErrReasonRequired] and
// removes nothing.
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
	if err := d.settle(ctx, m, AuditRecord{Action: AuditDiscarded, Reason: reason}, by); err != nil {
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
	m, err := d.letterAt(ctx, dl.Seq)
	if err != nil {
		return nil, err
	}
	if dl.ID != "" && m.Header.Get(wire.HeaderCommandID) != dl.ID {
		return nil, fmt.Errorf("%w: seq %d of %s is not a dead letter of %s", ErrDeadLetterNotFound, dl.Seq, d.names.DLQ, dl.ID)
	}
	return m, nil
}

// settle settles the dead letter m, in order, each step safe to repeat:
//  1. its audit record rec, kept (compact: no payload);
//  2. its whole copy on [wire.SettledSubject], with a TTL of
//     streams.dlq_settled_max_age (`esjet dlq show` reads it until then);
//  3. the mark that replaces it on its subject (the DLQ keeps one message
//     per subject), expected to find the letter there, with a TTL of
//     [wire.SettleMarkTTL]: then the letter is gone from `esjet dlq ls`,
//     and a second later its subject holds nothing.
//
// A crash before 3 leaves the letter open, with its audit record: acting
// on it again finishes (the streams drop the repeats inside their dedup
// windows).
func (d *DLQ) settle(ctx context.Context, m *jetstream.RawStreamMsg, rec AuditRecord, by string) error {
	cur := wire.DecodeDeadLetter(m)
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
	am := &nats.Msg{Subject: wire.AuditSubject(d.names.Namespace, cur.Kind, cur.Seq), Data: data, Header: nats.Header{
		wire.HeaderCommandID:   {cur.ID},
		wire.HeaderCommandKind: {cur.Kind},
		HeaderDLQAction:        {rec.Action},
		"Content-Type":         {"application/json"},
		jetstream.MsgIDHeader:  {auditMsgID(rec.Action, cur.Seq)},
	}}
	if _, err := d.js.PublishMsg(ctx, am, jetstream.WithExpectStream(d.names.DLQ)); err != nil {
		return fmt.Errorf("audit record on %s: %w (the dead letter is still there)", am.Subject, err)
	}
	sm := wire.SettledMsg(d.names.Namespace, m, rec.Action)
	if _, err := d.js.PublishMsg(ctx, sm, jetstream.WithExpectStream(d.names.DLQ), jetstream.WithMsgTTL(d.settledMaxAge)); err != nil {
		return fmt.Errorf("settled copy on %s: %w (the dead letter is still there; if the DLQ refuses per-message TTLs, run esjet provision)", sm.Subject, err)
	}
	mark := wire.SettleMark(m.Subject, rec.Action, m.Sequence)
	_, err = d.js.PublishMsg(ctx, mark, jetstream.WithExpectStream(d.names.DLQ), jetstream.WithMsgTTL(wire.SettleMarkTTL),
		jetstream.WithExpectLastSequencePerSubject(m.Sequence))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		// Settled already: by a repeat of this action (the mark is
		// there, or gone after its TTL), or by someone else.
		if m, gerr := d.lastOn(ctx, m.Subject); gerr == nil && (m == nil || wire.IsSettleMark(m.Header)) {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("settle mark on %s: %w (the dead letter is still there)", mark.Subject, err)
	}
	return nil
}

// lastOn is the last message on subject of the DLQ, nil when there is none.
func (d *DLQ) lastOn(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	st, err := d.stream(ctx)
	if err != nil {
		return nil, err
	}
	m, err := st.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	return m, err
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
	e, err := kv.Get(ctx, wire.ReceiptKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("receipt %s: %w", wire.ReceiptKey(id), err)
	}
	var rc wire.Receipt
	if json.Unmarshal(e.Value(), &rc) == nil && rc.Outcome != wire.OutcomeFailed {
		return nil
	}
	if err := kv.Delete(ctx, wire.ReceiptKey(id), jetstream.LastRevision(e.Revision())); err != nil {
		return fmt.Errorf("clear failed receipt %s: %w", wire.ReceiptKey(id), err)
	}
	return nil
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

// RetryMode says whether [DLQ.Retry] re-drives a command whose aggregate was
// already told it failed.
type RetryMode int

// Modes combine: RetryAfterReportedFailure | RetryPastReceipts.
const (
	// RetryUnlessReportedFailure refuses such a command (the default).
	RetryUnlessReportedFailure RetryMode = 0
	// RetryAfterReportedFailure re-drives it anyway: the operator knows the
	// aggregate did not compensate, or will reconcile the effect by hand.
	RetryAfterReportedFailure RetryMode = 1
	// RetryPastReceipts re-drives a command issued longer ago than the
	// receipts are kept, with no receipt (else refused with a
	// [*PastReceiptsError]): the operator checked it did not run.
	RetryPastReceipts RetryMode = 2
)

// refuseIfToldFailed returns a [*ReportedFailureError] when dl's aggregate
// recorded the command's <kind>_failed.
func (d *DLQ) refuseIfToldFailed(ctx context.Context, dl DeadLetter) error {
	if _, err := wire.ParseCommandID(dl.ID); err != nil {
		return nil // not an esjet command: no aggregate was told anything
	}
	log, err := streams.Open(ctx, d.js, d.names.Namespace, streams.Config{}, nil)
	if err != nil {
		return fmt.Errorf("retry %s: %w", dl.ID, err)
	}
	outcomes, err := reportedOutcomes(ctx, log, dl.ID)
	if err != nil {
		return fmt.Errorf("retry %s: %w", dl.ID, err)
	}
	if o, ok := toldFailed(outcomes); ok {
		ref, _ := wire.ParseCommandID(dl.ID)
		return &ReportedFailureError{CommandID: dl.ID, Kind: dl.Kind, AggregateType: ref.AggregateType,
			AggregateID: ref.AggregateID, Told: o}
	}
	return nil
}

// refuseIfPastReceipts returns a [*PastReceiptsError] when the receipts
// bucket has a max age, dl's command was issued before it, and it has no
// receipt: a done receipt of it may have expired.
func (d *DLQ) refuseIfPastReceipts(ctx context.Context, dl DeadLetter) error {
	st, err := d.js.Stream(ctx, wire.KVStream(d.names.Receipts))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("retry %s: receipts: %w", dl.ID, err)
	}
	age := st.CachedInfo().Config.MaxAge
	issued := dl.DeadAt
	if t, err := time.Parse(time.RFC3339Nano, dl.Header.Get(wire.HeaderIssued)); err == nil && t.Before(issued) {
		issued = t
	}
	if age <= 0 || !issued.Before(d.now().Add(-age)) {
		return nil
	}
	m, err := st.GetLastMsgForSubject(ctx, wire.KVSubject(d.names.Receipts, wire.ReceiptKey(dl.ID)))
	if err == nil && !wire.IsKVDeleteOp(m.Header.Get(wire.HeaderKVOperation)) {
		return nil // still there: it folds the re-drive, or is cleared as failed
	}
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("retry %s: receipt: %w", dl.ID, err)
	}
	return &PastReceiptsError{CommandID: dl.ID, Issued: issued, MaxAge: age}
}

// fenceBase is a re-drive's fence base: at least every fence the command
// was ever delivered with, so a receiver that remembers the highest one
// takes the re-driven delivery for a newer attempt, whichever band's
// consumer delivers it. That is the fence it died with, or (a letter
// written before it was recorded) the highest delivery sequence of the
// kind's consumers, each of which is above every fence it gave out.
func (d *DLQ) fenceBase(ctx context.Context, kind string, m *jetstream.RawStreamMsg) (uint64, error) {
	base := wire.DeadFence(m)
	for _, p := range wire.Priorities {
		name := wire.BandConsumerName(kind, p)
		c, err := d.js.Consumer(ctx, d.names.Outbox, name)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("read consumer %s for the re-drive's fence base: %w", name, err)
		}
		info := c.CachedInfo()
		base = max(base, info.Delivered.Consumer)
	}
	return base, nil
}

package consumer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/telemetry"
	"github.com/esjet/esjet/internal/wire"
)

// What a worker records when a delivery ends: the dead letter, the
// receipt, the outcome reported to the aggregate, the ack.

// deadLetter records a terminal failure: failed receipt, the failure
// reported to the aggregate, DLQ entry, then term. The letter comes last
// because an operator may retry it the moment it is visible: a retry must
// find the failure already recorded (it refuses to re-drive a command its
// aggregate was told failed, and it clears the failed receipt), never
// record it after the re-drive. Each step is idempotent and a delivery
// that finds a failed receipt comes straight back here, so a crash
// anywhere in between resumes the sequence; if the DLQ write fails the
// message is nak'ed and comes back: nothing is lost.
func (w *Worker) deadLetter(ctx context.Context, log *slog.Logger, m jetstream.Msg, raw *nats.Msg, seq uint64, d Delivery, cause error) {
	reason := wire.OneLine(cause.Error())
	if d.CommandID != "" {
		_, _, _ = w.saveReceipt(ctx, log, wire.Receipt{CommandID: d.CommandID, Kind: d.Kind, Outcome: wire.OutcomeFailed,
			Attempts: d.Attempt, LastError: reason, At: time.Now().UTC()})
		w.report(ctx, log, d, false, nil, reason) // best effort: the DLQ entry is the record
	}
	dl := wire.DeadLetterMsg(w.names.Namespace, raw, seq, reason, d.Attempt, w.cfg.Node, time.Now().UTC())
	if d.Fence > 0 {
		// A re-drive's fence base: its next fences rise above this one
		// whichever band's consumer delivers it.
		dl.Header[wire.HeaderDeadFence] = []string{strconv.FormatUint(d.Fence, 10)}
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	ack, err := w.js.PublishMsg(pctx, dl, jetstream.WithExpectStream(w.names.DLQ))
	cancel()
	if err != nil {
		log.Error("dead letter not written; the command will come back", "error", err)
		_ = m.NakWithDelay(w.backoff(d.Attempt))
		return
	}
	w.dead.Add(1)
	log.Warn("dead-lettered", "error", cause)
	if d.CommandID != "" {
		w.markLettered(ctx, log, d.CommandID, ack.Sequence)
	}
	_ = m.TermWithReason(reason)
	w.settleDeferral(ctx, log, d)
}

// markLettered records in command id's failed receipt the DLQ sequence of
// its dead letter. Best effort: a receipt not marked makes a later
// delivery write the letter again (deduplicated within the DLQ's window).
func (w *Worker) markLettered(ctx context.Context, log *slog.Logger, id string, dlqSeq uint64) {
	w.amendReceipt(ctx, log, id, "dead letter", func(rc *wire.Receipt) bool {
		if rc.Outcome != wire.OutcomeFailed || rc.DeadLetter != 0 {
			return false
		}
		rc.DeadLetter = dlqSeq
		return true
	})
}

// amendReceipt changes command id's receipt by change (false: nothing to
// change), by compare-and-set, three tries. Best effort: what it could not
// record (what names it) is logged.
func (w *Worker) amendReceipt(ctx context.Context, log *slog.Logger, id, what string, change func(*wire.Receipt) bool) {
	key := wire.ReceiptKey(id)
	for range 3 {
		e, err := w.receipts.Get(ctx, key)
		if err != nil {
			log.Warn(what+" not recorded in the receipt", "error", err)
			return
		}
		rc, err := wire.DecodeReceipt(e.Value())
		if err != nil || !change(&rc) {
			return
		}
		if _, err := w.receipts.Update(ctx, key, rc.Encode(), e.Revision()); err == nil {
			return
		}
	}
	log.Warn(what + " not recorded in the receipt: it kept changing")
}

// report sends the outcome to the aggregate when the decision asked for it.
// It returns false when the report should be tried again later.
func (w *Worker) report(ctx context.Context, log *slog.Logger, d Delivery, ok bool, result json.RawMessage, errText string) bool {
	if !d.Report || w.fb == nil || d.AggregateType == "" {
		return true
	}
	// No attempt count in the payload: every report of one outcome must be
	// byte-identical, or the aggregate would take a repeat for a conflict.
	out := wire.Outcome{CommandID: d.CommandID, Result: result, Error: errText}
	kind, key := wire.DoneKind(d.Kind), wire.DoneKey(d.CommandID)
	if !ok {
		kind, key = wire.FailedKind(d.Kind), wire.FailedKey(d.CommandID)
	}
	payload := out.Encode()
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	err := w.fb.Report(rctx, wire.Report{AggregateType: d.AggregateType, AggregateID: d.AggregateID, Kind: kind, Payload: payload,
		IdempotencyKey: key, CorrelationID: d.CorrelationID, CausationID: d.CommandID, TraceParent: telemetry.TraceParent(ctx), DecisionID: d.DecisionID})
	switch {
	case err == nil:
		return true
	case errors.Is(err, wire.ErrReportRefused):
		log.Error("outcome refused by the aggregate; the command is acked (see its receipt)", "kind", kind, "error", err)
		w.recordRefusal(ctx, log, d.CommandID, err)
		return true
	default:
		w.feedbackErrors.Add(1)
		log.Warn("outcome not reported; will retry", "kind", kind, "error", err)
		return false
	}
}

// recordRefusal writes in command id's receipt why its aggregate refused
// the outcome, so the command does not stay awaited unseen: reconcile,
// outbox and the console report it. Best effort: a receipt that cannot be
// updated leaves the log line.
func (w *Worker) recordRefusal(ctx context.Context, log *slog.Logger, id string, refusal error) {
	reason := wire.OneLine(refusal.Error())
	w.amendReceipt(ctx, log, id, "outcome refusal", func(rc *wire.Receipt) bool {
		if rc.OutcomeRefused == reason {
			return false
		}
		rc.OutcomeRefused = reason
		return true
	})
}

// ackFolded acknowledges a command whose done receipt is stored, without
// waiting for the server: a lost ack only redelivers it, and the receipt
// folds the redelivery (no second call, the outcome reported again under
// the same key). On one server a confirmed ack is no more durable anyway
// (nats-server does not fsync an ack, sync always or not: its reply
// comes from memory), and the wait was a round trip
// per command (fetch + ack 17.5k/s vs 6.1k/s confirmed).
func (w *Worker) ackFolded(log *slog.Logger, m jetstream.Msg) {
	if err := m.Ack(); err != nil {
		log.Warn("ack not sent; the receipt folds the redelivery", "error", err)
	}
}

// ack acknowledges and waits for the server to confirm it.
func (w *Worker) ack(ctx context.Context, log *slog.Logger, m jetstream.Msg) {
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := m.DoubleAck(actx); err != nil {
		// The command comes back; its receipt makes the next delivery a
		// no-op.
		log.Warn("ack not confirmed", "error", err)
	}
}

// receipt reads a command's receipt: found is false when it has none (or
// one that does not decode, which saveReceipt then meets). err is set when
// the read failed, so whether the command is done is not known.
//
// Under group commit the read goes through the receipts committer, which
// sends the reads of the node's workers that wait together as one request
// (streams.Committer.Last); it reads what kv.Get would.
func (w *Worker) receipt(ctx context.Context, id string) (_ wire.Receipt, found bool, err error) {
	key := wire.ReceiptKey(id)
	var value []byte
	if w.cfg.Receipts.Batching() {
		if !validKey(key) {
			return wire.Receipt{}, false, jetstream.ErrInvalidKey
		}
		m, err := w.cfg.Receipts.Last(ctx, wire.KVSubject(w.names.Receipts, key))
		if errors.Is(err, jetstream.ErrMsgNotFound) || err == nil && deletedEntry(m.Header) {
			return wire.Receipt{}, false, nil
		}
		if err != nil {
			return wire.Receipt{}, false, err
		}
		value = m.Data
	} else {
		e, err := w.receipts.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return wire.Receipt{}, false, nil
		}
		if err != nil {
			return wire.Receipt{}, false, err
		}
		value = e.Value()
	}
	rc, err := wire.DecodeReceipt(value)
	return rc, err == nil, nil
}

// validKey is nats.go's rule for a KV key (kv.Get refuses any other with
// ErrInvalidKey): the read through the committer applies it too.
func validKey(key string) bool {
	if key == "" || key[0] == '.' || key[len(key)-1] == '.' || strings.Contains(key, "..") {
		return false
	}
	for _, c := range []byte(key) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-/_=.", c) >= 0) {
			return false
		}
	}
	return true
}

// deletedEntry reports a KV delete or purge marker, or a marker the server
// left for a removed or expired key: kv.Get reads each as no entry.
func deletedEntry(h nats.Header) bool {
	if op := h.Get(wire.HeaderKVOperation); op != "" {
		return wire.IsKVDeleteOp(op)
	}
	switch h.Get(jetstream.MarkerReasonHeader) {
	case "MaxAge", "Purge", "Remove":
		return true
	}
	return false
}

// saveReceipt creates the command's receipt, or replaces a failed one (a
// dead letter re-driven and now done). A done receipt is never replaced: it
// is returned instead, so the caller reports the outcome on record. stored
// is false when no receipt could be written; held is true when one is on
// record that could not be read back, so what it holds is not known and
// must not be reported in its place.
func (w *Worker) saveReceipt(ctx context.Context, log *slog.Logger, rc wire.Receipt) (_ wire.Receipt, stored, held bool) {
	data := rc.Encode()
	key := wire.ReceiptKey(rc.CommandID)
	for range 3 {
		err := w.createReceipt(ctx, key, data)
		if err == nil {
			return rc, true, false
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			log.Error("receipt not written", "error", err)
			return rc, false, false
		}
		e, gerr := w.receipts.Get(ctx, key)
		if gerr != nil {
			held = true
			continue
		}
		held = false
		if old, err := wire.DecodeReceipt(e.Value()); err == nil && old.Outcome == wire.OutcomeDone {
			return old, true, false
		}
		if _, err := w.receipts.Update(ctx, key, data, e.Revision()); err == nil {
			return rc, true, false
		}
	}
	log.Error("receipt not written after retries", "command_id", rc.CommandID, "held_by_another", held)
	return rc, false, held
}

// createReceipt creates the receipt key, through the node's receipt group
// commit when there is one: a new key's put expects no message on its
// subject, as KeyValue.Create does. A key that exists (10071) goes to
// KeyValue.Create, which knows deleted keys, and so does any other
// failure of the group commit.
func (w *Worker) createReceipt(ctx context.Context, key string, data []byte) error {
	if w.cfg.Receipts != nil {
		m := nats.NewMsg(wire.KVSubject(w.names.Receipts, key))
		m.Data = data
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
		if _, err := w.cfg.Receipts.Publish(ctx, m); err == nil {
			return nil
		}
	}
	_, err := w.receipts.Create(ctx, key, data)
	return err
}

func digest(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:16])
}

// readReceipt reads the command's receipt before anything runs, and reads
// it again while the read fails: whether the command is done already (a
// redelivery after a lost ack has a receipt) is not known until then, and
// running it could apply it twice. The delivery keeps its lease meanwhile
// and counts no attempt, so a receipts stream that stalls longer than the
// retry budget does not dead-letter a command that never ran. ok is false
// when the delivery was dealt with here: given back because the worker is
// stopping, left to its next delivery because the lease ran out, or
// dead-lettered because its id cannot key a receipt.
func (w *Worker) readReceipt(ctx context.Context, stop <-chan struct{}, log *slog.Logger, m jetstream.Msg, raw *nats.Msg, seq uint64, d Delivery, l *lease) (_ wire.Receipt, found, ok bool) {
	for try := 1; ; try++ {
		rc, found, err := w.receipt(ctx, d.CommandID)
		switch {
		case err == nil:
			return rc, found, true
		case errors.Is(err, jetstream.ErrInvalidKey):
			// No receipt can ever be kept for it, so it cannot be run
			// once and only once.
			w.poison.Add(1)
			w.deadLetter(ctx, log, m, raw, seq, d, fmt.Errorf("command id %q cannot key a receipt: %w", d.CommandID, err))
			return wire.Receipt{}, false, false
		}
		w.unreadReceipts.Add(1)
		log.Warn("receipt not readable; reading it again before the command runs", "error", err, "try", try)
		select {
		case <-stop:
			w.handBack(ctx, log, m, d)
			return wire.Receipt{}, false, false
		case <-time.After(min(w.backoff(try), max(w.cfg.AckWait/3, time.Millisecond))):
		}
		if !l.renew(ctx, w.js.Conn(), m) {
			w.stale.Add(1)
			log.Warn("the lease ran out while the receipt was unreadable; the command waits for its next delivery")
			return wire.Receipt{}, false, false
		}
	}
}

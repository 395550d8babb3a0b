package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Every retry or discard of a dead letter writes an audit record to the DLQ
// stream on <ns>.dlq.audit.<kind>.<dlq seq> (wire.AuditSubject) before the
// letter leaves: a settle mark replaces it on its subject and expires, and
// a whole copy stays on <ns>.dlq.settled.<kind>.<dlq seq> for
// streams.dlq_settled_max_age. The audit record, compact (no payload), is
// kept: nothing settles without a trace.

// HeaderDLQAction is the action ([AuditRetried], [AuditDiscarded]) of an
// audit record.
const HeaderDLQAction = wire.HeaderDLQAction

// Audit actions.
const (
	AuditRetried   = "retried"   // re-driven into OUTBOX
	AuditDiscarded = "discarded" // dropped by an operator, with a reason
)

func auditMsgID(action string, dlqSeq uint64) string {
	return "audit:" + action + ":" + strconv.FormatUint(dlqSeq, 10)
}

// AuditRecord is what a retry or discard leaves in the DLQ stream on
// <ns>.dlq.audit.<kind>; it settles the dead letter at DLQSeq.
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

// audits returns the audit records on filter that match, oldest first.
func (d *DLQ) audits(ctx context.Context, filter string, match func(AuditRecord) bool) ([]AuditRecord, error) {
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

package ops

import (
	"errors"
	"fmt"
	"time"

	"github.com/esjet/esjet/internal/wire"
)

var (
	// ErrDeadLetterNotFound means the DLQ holds no dead letter for the
	// command id or at the sequence (it was never dead, or was retried or
	// discarded already).
	ErrDeadLetterNotFound = errors.New("ops: dead letter not found")
	// ErrReasonRequired means a discard was asked for without a reason.
	ErrReasonRequired = errors.New("ops: a discard needs a reason")
	// ErrUnknownCommand means nothing in the log, OUTBOX, the receipts or
	// the DLQ knows the command id.
	ErrUnknownCommand = errors.New("ops: unknown command")
	// ErrRepairDeduplicated means OUTBOX dropped re-published orphans as
	// duplicates: their ids were stored (then deleted) less than its
	// duplicate window ago. Run the repair again once the window has passed.
	ErrRepairDeduplicated = errors.New("ops: OUTBOX dropped re-published orphans as duplicates")
	// ErrBadOpsRequest means a DLQ action request the node cannot read: a
	// user that is not a subject token, an unknown action, a bad body.
	ErrBadOpsRequest = errors.New("ops: bad operator request")
	// ErrPastReceipts is wrapped by [*PastReceiptsError].
	ErrPastReceipts = errors.New("ops: the command is older than the receipts are kept")
	// ErrReportedFailure is wrapped by [*ReportedFailureError].
	ErrReportedFailure = errors.New("ops: the aggregate was already told the command failed")
	// ErrNoNamespace is wrapped by [*NoNamespaceError].
	ErrNoNamespace = errors.New("ops: no such namespace on this server")
)

// ReportedFailureError is why [DLQ.Retry] refuses a dead letter: its
// aggregate recorded <kind>_failed for the command, and may have
// compensated. A re-driven command that then succeeds applies an effect the
// aggregate will refuse to hear about.
type ReportedFailureError struct {
	CommandID, Kind            string
	AggregateType, AggregateID string
	Told                       ReportedOutcome // the decision that recorded the failure
}

func (e *ReportedFailureError) Error() string {
	return fmt.Sprintf("retry %s: %s/%s was already told %s (decision %s, log seq %d, %s) and may have compensated; "+
		"a re-driven command that succeeds now would apply an effect the aggregate no longer expects. "+
		"Check %s/%s first; to re-drive anyway, say so explicitly (esjet dlq retry --after-failed)",
		e.CommandID, e.AggregateType, e.AggregateID, wire.FailedKind(e.Kind), e.Told.DecisionID, e.Told.Seq,
		e.Told.Time.Format(time.RFC3339), e.AggregateType, e.AggregateID)
}

func (e *ReportedFailureError) Unwrap() error { return ErrReportedFailure }

// PastReceiptsError is why [DLQ.Retry] refuses a dead letter whose command
// was issued longer ago than the receipts bucket keeps a receipt
// (streams.receipts_max_age) and has none: had another copy of it been
// done, its receipt may have expired, and the re-drive would run it again.
type PastReceiptsError struct {
	CommandID string
	Issued    time.Time
	MaxAge    time.Duration
}

func (e *PastReceiptsError) Error() string {
	return fmt.Sprintf("retry %s: issued %s, longer ago than receipts are kept (%s), and it has none: whether it ran since cannot be told. "+
		"Check its effect with the target first; to re-drive anyway, say so explicitly (esjet dlq retry --past-receipts)",
		e.CommandID, e.Issued.Format(time.RFC3339), e.MaxAge)
}

func (e *PastReceiptsError) Unwrap() error { return ErrPastReceipts }

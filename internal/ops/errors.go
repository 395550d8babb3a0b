package ops

import "errors"

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
)

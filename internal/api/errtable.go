package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/projection"
	"github.com/esjet/esjet/internal/shred"
	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Sentinel maps an error to the API's answer: the status and code of every
// error that wraps Err, and (say, when set) the message a user reads.
type Sentinel struct {
	Err    error
	Status int
	Code   string
	say    func(error) string
}

// sentinels is the one table from an error to its status and code, for
// every surface (NATS, HTTP, the views, the console): the first entry whose
// Err the error wraps answers it. Typed errors come first, in [ErrorOf].
var sentinels = []Sentinel{
	{Err: aggregate.ErrUnknownType, Status: http.StatusNotFound, Code: CodeUnknownType},
	// The code already says "not found": the message says what was not.
	{Err: aggregate.ErrNotFound, Status: http.StatusNotFound, Code: CodeNotFound, say: func(err error) string {
		return strings.TrimPrefix(err.Error(), aggregate.ErrNotFound.Error()+": ")
	}},
	{Err: aggregate.ErrRawCommandNotAllowed, Status: http.StatusForbidden, Code: CodeRawCommandNotAllowed},
	{Err: aggregate.ErrWrongSite, Status: http.StatusConflict, Code: CodeWrongSite},
	{Err: aggregate.ErrOutcomeNotSendable, Status: http.StatusForbidden, Code: CodeOutcomeNotSendable},
	{Err: aggregate.ErrUnknownCommand, Status: http.StatusBadRequest, Code: CodeUnknownCommand},
	{Err: aggregate.ErrBadCommand, Status: http.StatusBadRequest, Code: CodeBadPayload},
	{Err: aggregate.ErrManagedType, Status: http.StatusBadRequest, Code: CodeManagedType},
	{Err: streams.ErrInvalidDecision, Status: http.StatusBadRequest, Code: CodeInvalidEvents},
	{Err: aggregate.ErrArchived, Status: http.StatusConflict, Code: CodeArchived},
	{Err: aggregate.ErrKeyReused, Status: http.StatusConflict, Code: CodeIdempotencyKeyReused},
	{Err: aggregate.ErrConflict, Status: http.StatusConflict, Code: CodeConflict},
	{Err: aggregate.ErrTooLarge, Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge},
	{Err: streams.ErrTooLarge, Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge},
	{Err: streams.ErrStorageFull, Status: http.StatusInsufficientStorage, Code: CodeStorageFull, say: func(err error) string {
		return err.Error() + " — nothing was written; free space or raise the JetStream storage limits (nats.embedded.max_store), then retry"
	}},
	// A newer build wrote what the aggregate must read: another node (of
	// that build) can answer, this one never guesses.
	{Err: aggregate.ErrSchemaTooNew, Status: http.StatusServiceUnavailable, Code: CodeSchemaTooNew},
	{Err: streams.ErrEnvelopeTooNew, Status: http.StatusServiceUnavailable, Code: CodeEnvelopeTooNew},
	// A forget is erasing the subject's keys: nothing is sealed for it
	// meanwhile; a retry a moment later reads the state as erased.
	{Err: shred.ErrForgetting, Status: http.StatusServiceUnavailable, Code: CodeUnavailable},
	{Err: streams.ErrUnknownOutcome, Status: http.StatusServiceUnavailable, Code: CodeOutcomeUnknown, say: func(err error) string {
		return err.Error() + " — the command may have been recorded: retry with the same Idempotency-Key, or read the aggregate's events before sending it again without one"
	}},

	// The views: parked and stopped answer at once, a wait that ran out 504.
	{Err: projection.ErrUnknown, Status: http.StatusNotFound, Code: CodeUnknownView},
	{Err: projection.ErrOwnStore, Status: http.StatusNotFound, Code: CodeOwnStore},
	{Err: projection.ErrNotFound, Status: http.StatusNotFound, Code: CodeNotFound},
	{Err: projection.ErrInvalid, Status: http.StatusBadRequest, Code: CodeBadRequest},
	{Err: projection.ErrParked, Status: http.StatusConflict, Code: CodeParked},
	{Err: projection.ErrStopped, Status: http.StatusServiceUnavailable, Code: CodeViewStopped},
	{Err: projection.ErrNotYet, Status: http.StatusGatewayTimeout, Code: CodeNotYet},

	// The operator tools (the console's DLQ and inspector).
	{Err: ops.ErrBadOpsRequest, Status: http.StatusBadRequest, Code: CodeBadRequest},
	{Err: ops.ErrReasonRequired, Status: http.StatusBadRequest, Code: CodeBadRequest},
	{Err: ops.ErrDeadLetterNotFound, Status: http.StatusNotFound, Code: CodeDeadLetterNotFound},
	{Err: ops.ErrPastReceipts, Status: http.StatusConflict, Code: CodePastReceipts},
	{Err: ops.ErrUnknownCommand, Status: http.StatusNotFound, Code: CodeUnknownCommand},

	{Err: context.Canceled, Status: http.StatusServiceUnavailable, Code: CodeUnavailable, say: unavailable},
	{Err: context.DeadlineExceeded, Status: http.StatusServiceUnavailable, Code: CodeUnavailable, say: unavailable},
}

func unavailable(err error) string {
	return err.Error() + " — the node did not finish in time; retry with the same Idempotency-Key (without one, read the aggregate's events first)"
}

// ErrorOf is the API's answer to err, whatever surface reports it: err
// itself when it is an [*Error]; else its status and code from the typed
// errors and the one table of sentinels (more, a surface's own, tried
// first), with a message a user can read — no Go package prefixes, no Go
// type names. An error nothing names is a 500 "internal".
func ErrorOf(err error, more ...Sentinel) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	e := classify(err, more)
	e.Message = userMessage(e.Message)
	return e
}

// classify picks the status and code of an error.
func classify(err error, more []Sentinel) *Error {
	var rej *aggregate.Rejection
	var vc *aggregate.VersionConflictError
	var te *wire.TokenError
	var rf *ops.ReportedFailureError
	switch {
	case errors.Is(err, aggregate.ErrInvalidDecision):
		// The aggregate broke the contract: a bug on the server side, even
		// when the cause underneath is a token or JSON error.
		return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
	case errors.As(err, &rej) && rej.Code == CodeNotFound:
		// The domain's word for "this command needs an aggregate that does
		// not exist": the same 404 as reading an aggregate with no events.
		return &Error{Status: http.StatusNotFound, Code: rej.Code, Message: rej.Message}
	case errors.As(err, &rej):
		return &Error{Status: http.StatusUnprocessableEntity, Code: rej.Code, Message: rej.Message}
	case errors.As(err, &vc):
		v := vc.Actual
		return &Error{Status: http.StatusConflict, Code: CodeVersionConflict, Message: err.Error(), Version: &v}
	case errors.Is(err, wire.ErrBadCommandID):
		return &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: err.Error()}
	case errors.As(err, &te):
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidToken, Message: err.Error()}
	case errors.As(err, &rf):
		return &Error{Status: http.StatusConflict, Code: CodeReportedFailure, Message: err.Error()}
	}
	for _, table := range [][]Sentinel{more, sentinels} {
		for _, s := range table {
			if errors.Is(err, s.Err) {
				msg := jsonWords(err)
				if s.say != nil {
					msg = s.say(err)
				}
				return &Error{Status: s.Status, Code: s.Code, Message: msg}
			}
		}
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
}

package console

import (
	"errors"
	"net/http"
	"strings"

	"github.com/esjet/esjet/internal/aggregate"
	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/wire"
)

// ErrActionsDisabled is returned for a retry or discard when the node does
// not allow the console's write actions (console.allow_actions: false).
var ErrActionsDisabled = errors.New("console: write actions are disabled")

// ErrBadRequest wraps a request the console cannot read.
var ErrBadRequest = errors.New("console: bad request")

// apiError gives err the API's status, code and message.
func apiError(err error) *api.Error {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae
	}
	var rf *ops.ReportedFailureError
	status, code := http.StatusInternalServerError, "internal"
	switch {
	case errors.Is(err, ErrActionsDisabled):
		status, code = http.StatusForbidden, "actions_disabled"
	case errors.Is(err, ErrBadRequest), errors.Is(err, ops.ErrBadOpsRequest), errors.Is(err, ops.ErrReasonRequired),
		errors.Is(err, wire.ErrBadCommandID), errors.Is(err, wire.ErrInvalidToken):
		status, code = http.StatusBadRequest, "bad_request"
	case errors.As(err, &rf):
		status, code = http.StatusConflict, "reported_failure"
	case errors.Is(err, ops.ErrDeadLetterNotFound):
		status, code = http.StatusNotFound, "dead_letter_not_found"
	case errors.Is(err, ops.ErrUnknownCommand):
		status, code = http.StatusNotFound, "unknown_command"
	case errors.Is(err, aggregate.ErrUnknownType):
		status, code = http.StatusNotFound, "unknown_type"
	case errors.Is(err, aggregate.ErrNotFound):
		return &api.Error{Status: http.StatusNotFound, Code: "not_found",
			Message: strings.TrimPrefix(err.Error(), aggregate.ErrNotFound.Error()+": ")}
	}
	return &api.Error{Status: status, Code: code, Message: err.Error()}
}

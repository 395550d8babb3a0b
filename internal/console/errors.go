package console

import (
	"errors"
	"net/http"

	"github.com/esjet/esjet/internal/api"
)

// ErrActionsDisabled is returned for a retry or discard when the node does
// not allow the console's write actions (console.allow_actions: false).
var ErrActionsDisabled = errors.New("console: write actions are disabled")

// ErrBadRequest wraps a request the console cannot read.
var ErrBadRequest = errors.New("console: bad request")

// apiError gives err the API's status, code and message ([api.ErrorOf]).
func apiError(err error) *api.Error {
	return api.ErrorOf(err,
		api.Sentinel{Err: ErrActionsDisabled, Status: http.StatusForbidden, Code: api.CodeActionsDisabled},
		api.Sentinel{Err: ErrBadRequest, Status: http.StatusBadRequest, Code: api.CodeBadRequest})
}

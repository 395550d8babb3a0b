package console

import (
	"errors"
	"fmt"
	"mime"
	"net/http"

	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/wire"
)

// WorkersRequest is the body of a pause or resume: why (kept in the
// record).
type WorkersRequest struct {
	Reason string `json:"reason"`
}

// handleWorkersAction pauses or resumes the kind {kind} on every node
// ({action} pause or resume), as esjet workers does, recording the HTTP
// identity (or "console at <host>") and the reason.
func (c *Console) handleWorkersAction(w http.ResponseWriter, r *http.Request) {
	rec, err := c.workersAction(r)
	c.reply(w, rec, err)
}

func (c *Console) workersAction(r *http.Request) (wire.PauseRecord, error) {
	if !c.cfg.AllowActions {
		return wire.PauseRecord{}, fmt.Errorf("%w on this node: set console.allow_actions: true (or ESJET_CONSOLE_ALLOW_ACTIONS=true) to pause and resume kinds here, or use esjet workers", ErrActionsDisabled)
	}
	if c.cfg.SetPaused == nil {
		return wire.PauseRecord{}, &api.Error{Status: http.StatusNotFound, Code: "no_route", Message: "this node cannot pause kinds"}
	}
	action := r.PathValue("action")
	if action != "pause" && action != "resume" {
		return wire.PauseRecord{}, fmt.Errorf("%w: unknown action %q: use pause or resume", ErrBadRequest, action)
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return wire.PauseRecord{}, fmt.Errorf("%w: Content-Type %q: send the body as application/json", ErrBadRequest, r.Header.Get("Content-Type"))
	}
	kind := r.PathValue("kind")
	if err := wire.ValidateToken("command kind", kind); err != nil {
		return wire.PauseRecord{}, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	var req WorkersRequest
	var dup *api.Error
	if err := decode(r, &req); errors.As(err, &dup) {
		return wire.PauseRecord{}, dup
	} else if err != nil {
		return wire.PauseRecord{}, fmt.Errorf("%w: body: %w (want {\"reason\": …})", ErrBadRequest, err)
	}
	if len(req.Reason) > 500 {
		return wire.PauseRecord{}, fmt.Errorf("%w: the reason is %d bytes; at most 500", ErrBadRequest, len(req.Reason))
	}
	by := actor(r)
	rec, err := c.cfg.SetPaused(r.Context(), kind, action == "pause", by, req.Reason)
	if errors.Is(err, consumer.ErrAlreadyPaused) || errors.Is(err, consumer.ErrNotPaused) {
		return wire.PauseRecord{}, &api.Error{Status: http.StatusConflict, Code: "conflict", Message: err.Error()}
	}
	if err != nil {
		return wire.PauseRecord{}, err
	}
	c.logger.Info("workers action", "action", action, "kind", kind, "by", by, "reason", req.Reason)
	c.ovMu.Lock()
	c.ovAt = c.ovAt.AddDate(-1, 0, 0) // the next overview shows it
	c.ovMu.Unlock()
	return rec, nil
}

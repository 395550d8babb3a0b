package console

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"

	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/telemetry"
)

// DeadLetters is the DLQ page: the unsettled dead letters, oldest first.
type DeadLetters struct {
	Kind         string           `json:"kind,omitempty"`
	Letters      []ops.DeadLetter `json:"letters"`
	AllowActions bool             `json:"allow_actions"`
}

// DeadLetterDetail is one dead letter with its audit history and what the
// inspector knows of its command (its cause, OUTBOX copies, receipt and
// the outcomes its aggregate recorded).
type DeadLetterDetail struct {
	ops.DeadLetterDetail
	Command      *ops.CommandInfo `json:"command,omitempty"`
	AllowActions bool             `json:"allow_actions"`
}

// ActionRequest is the body of a retry or discard.
type ActionRequest struct {
	// CommandID, when set, must be the letter's command id: the page sends
	// the one it showed, so a stale page cannot act on another letter.
	CommandID string `json:"command_id,omitempty"`
	// AfterFailed re-drives a command whose aggregate was already told
	// <kind>_failed (retry only), as `esjet dlq retry --after-failed`.
	AfterFailed bool `json:"after_failed,omitempty"`
	// PastReceipts re-drives a command older than the receipts are kept
	// that has none, as `esjet dlq retry --past-receipts`.
	PastReceipts bool `json:"past_receipts,omitempty"`
	// Reason is why it is discarded (discard only; required).
	Reason string `json:"reason,omitempty"`
}

func (c *Console) handleDLQList(w http.ResponseWriter, r *http.Request) {
	kind := r.URL.Query().Get("kind")
	letters, err := c.dlq.List(r.Context(), ops.Filter{Kind: kind, ErrorContains: r.URL.Query().Get("error")})
	c.reply(w, DeadLetters{Kind: kind, Letters: letters, AllowActions: c.cfg.AllowActions}, err)
}

func (c *Console) handleDLQShow(w http.ResponseWriter, r *http.Request) {
	det, err := c.dlq.Show(r.Context(), r.PathValue("seq"))
	if err != nil {
		c.reply(w, nil, err)
		return
	}
	out := DeadLetterDetail{DeadLetterDetail: det, AllowActions: c.cfg.AllowActions}
	if info, err := c.insp.Command(r.Context(), det.ID); err == nil {
		out.Command = &info
	}
	c.reply(w, out, nil)
}

// handleDLQAction retries or discards the dead letter at {seq}, through the
// same ops.DLQ calls the node serves `esjet dlq` with: the same checks
// (still a dead letter, not settled, the aggregate not told it failed
// unless after_failed), the same audit record, naming the HTTP identity
// ("http user oncall at <host>") or, without http.auth, "console at
// <host>". The listener's guard has already refused another origin and a
// body that is not JSON; the content type is checked here too, so the
// console stays safe wherever it is mounted.
func (c *Console) handleDLQAction(w http.ResponseWriter, r *http.Request) {
	rep, err := c.dlqAction(r)
	c.reply(w, rep, err)
}

func (c *Console) dlqAction(r *http.Request) (ops.ActionReply, error) {
	if !c.cfg.AllowActions {
		return ops.ActionReply{}, fmt.Errorf("%w on this node: set console.allow_actions: true (or ESJET_CONSOLE_ALLOW_ACTIONS=true) to retry and discard dead letters here, or use esjet dlq", ErrActionsDisabled)
	}
	action := r.PathValue("action")
	if action != ops.ActionRetry && action != ops.ActionDiscard {
		return ops.ActionReply{}, fmt.Errorf("%w: unknown action %q: use %s or %s", ErrBadRequest, action, ops.ActionRetry, ops.ActionDiscard)
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return ops.ActionReply{}, fmt.Errorf("%w: Content-Type %q: send the body as application/json", ErrBadRequest, r.Header.Get("Content-Type"))
	}
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil || seq == 0 {
		return ops.ActionReply{}, fmt.Errorf("%w: %q is not a DLQ sequence number", ErrBadRequest, r.PathValue("seq"))
	}
	var req ActionRequest
	var dup *api.Error
	if err := decode(r, &req); errors.As(err, &dup) {
		return ops.ActionReply{}, dup
	} else if err != nil {
		return ops.ActionReply{}, fmt.Errorf("%w: body: %w (want {\"command_id\": …, \"after_failed\": bool, \"reason\": …})", ErrBadRequest, err)
	}
	ctx := r.Context()
	dl, err := c.dlq.Get(ctx, strconv.FormatUint(seq, 10))
	if err != nil {
		return ops.ActionReply{}, err
	}
	if req.CommandID != "" && req.CommandID != dl.ID {
		return ops.ActionReply{}, fmt.Errorf("%w: seq %d is a dead letter of %s, not of %s", ops.ErrDeadLetterNotFound, seq, dl.ID, req.CommandID)
	}
	by := actor(r)
	rep := ops.NewActionReply(dl, by)
	if action == ops.ActionRetry {
		mode := ops.RetryUnlessReportedFailure
		if req.AfterFailed {
			mode |= ops.RetryAfterReportedFailure
		}
		if req.PastReceipts {
			mode |= ops.RetryPastReceipts
		}
		rep.Action = ops.AuditRetried
		rep.MsgID, err = c.dlq.Retry(ctx, dl, by, mode)
	} else {
		rep.Action = ops.AuditDiscarded
		err = c.dlq.Discard(ctx, dl, req.Reason, by)
	}
	if err != nil {
		return ops.ActionReply{}, err
	}
	c.logger.Info("dlq action", "action", rep.Action, "seq", rep.Seq, "command_id", rep.CommandID, "decision_id", rep.DecisionID,
		"trace_id", telemetry.TraceIDOf(rep.TraceParent), "by", by)
	return rep, nil
}

package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/esjet/esjet/internal/wire"
)

// The node serves the DLQ actions on esjet.<ns>.ops.<user>.dlq.<action>
// (retry, discard): they republish to OUTBOX, clear a failed receipt and
// write the audit record, which only the node's role may. The user is the
// subject's token: with roles, the operator user U may publish only to
// esjet.<ns>.ops.U.> (broker.RolePermissions), so the server has checked
// it, and the audit record says "nats user U". On a server without users
// nothing is checked, and the token ($USER@host) is recorded as given.

// DLQ actions the node serves.
const (
	ActionRetry   = "retry"
	ActionDiscard = "discard"
)

// CheckUserToken says whether user can be the user token of an ops
// subject: one NATS subject token, printable, no dot, wildcard or space.
func CheckUserToken(user string) error {
	if user == "" {
		return fmt.Errorf("%w: empty user", ErrBadOpsRequest)
	}
	for _, r := range user {
		if r == '.' || r == '*' || r == '>' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("%w: user %q is not one NATS subject token (no '.', '*', '>', spaces or control characters)", ErrBadOpsRequest, user)
		}
	}
	return nil
}

// UserToken makes name (e.g. $USER@host) one subject token: '.', '*',
// '>', spaces and control characters become '_'.
func UserToken(name string) string {
	t := strings.Map(func(r rune) rune {
		if r == '.' || r == '*' || r == '>' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return '_'
		}
		return r
	}, name)
	if t == "" {
		return "unknown"
	}
	return t
}

// ActionRequest is the body of a DLQ action request.
type ActionRequest struct {
	// Seq is the dead letter's DLQ sequence (required).
	Seq uint64 `json:"seq"`
	// CommandID, when set, must be the entry's command id.
	CommandID string `json:"command_id,omitempty"`
	// AfterFailed re-drives a command whose aggregate was told
	// <kind>_failed (retry only; [RetryAfterReportedFailure]).
	AfterFailed bool `json:"after_failed,omitempty"`
	// PastReceipts re-drives a command older than the receipts are kept
	// that has none (retry only; [RetryPastReceipts]).
	PastReceipts bool `json:"past_receipts,omitempty"`
	// Reason is why it is discarded (discard only; required there).
	Reason string `json:"reason,omitempty"`
}

// ActionReply is what the node answers to a DLQ action that succeeded.
type ActionReply struct {
	Action    string `json:"action"` // AuditRetried or AuditDiscarded
	Seq       uint64 `json:"seq"`
	CommandID string `json:"command_id"`
	Kind      string `json:"kind"`
	Attempts  int    `json:"attempts"`
	Error     string `json:"error"`
	// MsgID is the re-driven copy's Nats-Msg-Id (retries only).
	MsgID string `json:"msg_id,omitempty"`
	// By is who the audit record names.
	By string `json:"by"`
	// DecisionID is the decision that emitted the command; TraceParent the
	// command's trace (for the node's log line, not sent).
	DecisionID  string `json:"decision_id,omitempty"`
	TraceParent string `json:"-"`
}

// NewActionReply starts the reply to an action on dl by by.
func NewActionReply(dl DeadLetter, by string) ActionReply {
	return ActionReply{Seq: dl.Seq, CommandID: dl.ID, Kind: dl.Kind, Attempts: dl.Attempts, Error: dl.Error, By: by,
		DecisionID: dl.DecisionID, TraceParent: dl.Header.Get(wire.HeaderTraceParent)}
}

// Server runs the DLQ actions a node serves.
type Server struct {
	dlq *DLQ
	// authenticated: the server has users, so the subject's user token was
	// checked by its permissions.
	authenticated bool
}

// UsersMode says whether the NATS server authenticates users.
type UsersMode int

const (
	// NoUsers: a server without users (the loopback default); the user
	// token is recorded as the CLI gave it.
	NoUsers UsersMode = iota
	// WithUsers: the server authenticated the requester, and its
	// permissions allow the operator only its own ops subject; the audit
	// record says "nats user <token>".
	WithUsers
)

// NewServer returns the DLQ action server of d.
func NewServer(d *DLQ, mode UsersMode) *Server {
	return &Server{dlq: d, authenticated: mode == WithUsers}
}

// By is what the audit record of an action by user token says.
func (s *Server) By(user string) string {
	if s.authenticated {
		return "nats user " + user
	}
	return user
}

// Serve runs action (ActionRetry, ActionDiscard) for user, the token of
// the request's subject, with body an [ActionRequest]. Errors wrap
// [ErrBadOpsRequest], [ErrDeadLetterNotFound], [ErrReportedFailure] or
// [ErrReasonRequired] when they are the requester's to fix.
func (s *Server) Serve(ctx context.Context, user, action string, body []byte) (ActionReply, error) {
	if err := CheckUserToken(user); err != nil {
		return ActionReply{}, err
	}
	if action != ActionRetry && action != ActionDiscard {
		return ActionReply{}, fmt.Errorf("%w: unknown DLQ action %q: use %s or %s", ErrBadOpsRequest, action, ActionRetry, ActionDiscard)
	}
	var req ActionRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return ActionReply{}, fmt.Errorf("%w: dlq %s body: %w (want {\"seq\": N, ...})", ErrBadOpsRequest, action, err)
	}
	if req.Seq == 0 {
		return ActionReply{}, fmt.Errorf("%w: dlq %s: no seq (the dead letter's DLQ sequence)", ErrBadOpsRequest, action)
	}
	dl, err := s.dlq.Get(ctx, strconv.FormatUint(req.Seq, 10))
	if err != nil {
		return ActionReply{}, err
	}
	if req.CommandID != "" && dl.ID != req.CommandID {
		return ActionReply{}, fmt.Errorf("%w: seq %d is a dead letter of %s, not of %s", ErrDeadLetterNotFound, req.Seq, dl.ID, req.CommandID)
	}
	by := s.By(user)
	rep := NewActionReply(dl, by)
	switch action {
	case ActionRetry:
		mode := RetryUnlessReportedFailure
		if req.AfterFailed {
			mode |= RetryAfterReportedFailure
		}
		if req.PastReceipts {
			mode |= RetryPastReceipts
		}
		rep.Action = AuditRetried
		rep.MsgID, err = s.dlq.Retry(ctx, dl, by, mode)
	default:
		rep.Action = AuditDiscarded
		err = s.dlq.Discard(ctx, dl, req.Reason, by)
	}
	if err != nil {
		return ActionReply{}, err
	}
	return rep, nil
}

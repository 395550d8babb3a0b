package node

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/broker"
	"github.com/esjet/esjet/internal/ops"
	"github.com/esjet/esjet/internal/telemetry"
)

// opsHandler serves the operator's DLQ actions (esjet dlq retry/discard) on
// esjet.<ns>.ops.<user>.dlq.<action>, through the API's service: the node
// republishes to OUTBOX, clears the receipt and writes the audit record, so
// an operator needs no write access to them. Whether the server has users
// (and so checked the user token against the operator's permissions) is
// asked once: the node's own connection has a user exactly then. A letter
// it settles stays, whole, for settledMaxAge.
//
// The workers' actions (esjet workers ls|pause|resume, on
// esjet.<ns>.ops.<user>.workers.<action>) go to workers, with the user as
// the audit names it.
func opsHandler(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, ns string, settledMaxAge time.Duration, logger *slog.Logger, workers, personal workersOps) api.OpsHandler {
	mode := ops.WithUsers
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	id, err := broker.WhoAmI(wctx, nc)
	switch {
	case err != nil:
		// A server that refuses the question has permissions, so users.
		logger.Warn("ops: cannot ask the server who the node is; DLQ audit records will say 'nats user <token>'", "error", err)
	case id.User == "":
		mode = ops.NoUsers
	}
	srv := ops.NewServer(ops.OpenDLQ(js, ns).WithSettledMaxAge(settledMaxAge), mode)
	return func(ctx context.Context, user, action string, body []byte) (any, error) {
		if a, ok := strings.CutPrefix(action, "workers."); ok {
			if err := ops.CheckUserToken(user); err != nil {
				return nil, opsError(err)
			}
			return workers(ctx, srv.By(user), a, body)
		}
		if a, ok := strings.CutPrefix(action, "personal."); ok {
			if err := ops.CheckUserToken(user); err != nil {
				return nil, opsError(err)
			}
			return personal(ctx, srv.By(user), a, body)
		}
		rep, err := srv.Serve(ctx, user, action, body)
		if err != nil {
			return nil, opsError(err)
		}
		logger.Info("dlq action", "action", rep.Action, "seq", rep.Seq, "command_id", rep.CommandID, "decision_id", rep.DecisionID,
			"trace_id", telemetry.TraceIDOf(rep.TraceParent), "by", rep.By)
		return rep, nil
	}
}

// opsError gives an operator action's error its API status.
func opsError(err error) error {
	status, code := 500, "internal"
	switch {
	case errors.Is(err, ops.ErrBadOpsRequest), errors.Is(err, ops.ErrReasonRequired):
		status, code = 400, "bad_request"
	case errors.Is(err, ops.ErrDeadLetterNotFound):
		status, code = 404, "dead_letter_not_found"
	case errors.Is(err, ops.ErrReportedFailure):
		status, code = 409, "reported_failure"
	case errors.Is(err, ops.ErrPastReceipts):
		status, code = 409, "past_receipts"
	}
	return &api.Error{Status: status, Code: code, Message: err.Error()}
}

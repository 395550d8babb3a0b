package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/esjet/esjet/internal/api"
	"github.com/esjet/esjet/internal/consumer"
	"github.com/esjet/esjet/internal/wire"
)

// The operators' workers actions, asked of any node (esjet workers …):
//
//	esjet.<ns>.ops.<user>.workers.ls      {}                  → []consumer.KindStatus
//	esjet.<ns>.ops.<user>.workers.pause   {"kind","reason"}   → WorkersActionReply
//	esjet.<ns>.ops.<user>.workers.resume  {"kind","reason"}   → WorkersActionReply
//
// A pause is a record in KV <ns>_workers that every node watches: the
// kind's workers on every node stop pulling (commands in flight finish;
// what waits stays in OUTBOX, undelivered, its attempts untouched) until a
// resume. The record names who paused or resumed it, when and why, and
// the answering node logs the action.

// workersOps serves one workers action for by (as the audit names the user).
type workersOps func(ctx context.Context, by, action string, body []byte) (any, error)

// WorkersAction is the body of a pause or resume.
type WorkersAction struct {
	Kind   string `json:"kind"`
	Reason string `json:"reason,omitempty"`
}

// WorkersActionReply says what a pause or resume did.
type WorkersActionReply struct {
	Action string              `json:"action"` // pause or resume
	Record wire.PauseRecord    `json:"record"`
	Status consumer.KindStatus `json:"status"`
}

// maxReason bounds a pause's reason (it is kept in the record).
const maxReason = 500

func (n *Node) workersAction(ctx context.Context, by, action string, body []byte) (any, error) {
	switch action {
	case "ls":
		return n.workerStatuses(ctx)
	case "pause", "resume":
	default:
		return nil, &api.Error{Status: 404, Code: "no_route", Message: fmt.Sprintf("no workers action %q; the actions are ls, pause, resume", action)}
	}
	var a WorkersAction
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, &api.Error{Status: 400, Code: "bad_request", Message: fmt.Sprintf(`workers %s: the body must be {"kind": …, "reason": …}: %v`, action, err)}
	}
	if len(a.Reason) > maxReason {
		return nil, &api.Error{Status: 400, Code: "bad_request", Message: fmt.Sprintf("workers %s: the reason is %d bytes; at most %d", action, len(a.Reason), maxReason)}
	}
	rec, err := n.control.SetPaused(ctx, a.Kind, action == "pause", by, a.Reason)
	switch {
	case errors.Is(err, consumer.ErrAlreadyPaused), errors.Is(err, consumer.ErrNotPaused):
		return nil, &api.Error{Status: 409, Code: "conflict", Message: err.Error()}
	case errors.As(err, new(*wire.TokenError)):
		return nil, &api.Error{Status: 400, Code: "bad_request", Message: fmt.Sprintf("workers %s: %v", action, err)}
	case err != nil:
		return nil, err
	}
	n.logger.Info("workers action", "action", action, "kind", a.Kind, "by", by, "reason", a.Reason)
	rep := WorkersActionReply{Action: action, Record: rec, Status: consumer.KindStatus{Kind: a.Kind}}
	if sts, err := n.workerStatuses(ctx); err == nil {
		for _, st := range sts {
			if st.Kind == a.Kind {
				rep.Status = st
			}
		}
	}
	rep.Status.Paused = rec.Paused // this node's watcher may not have seen it yet
	return rep, nil
}

// workerStatuses are every kind's status, with this node's rate limits.
func (n *Node) workerStatuses(ctx context.Context) ([]consumer.KindStatus, error) {
	limits := map[string]consumer.KindConfig{}
	for kind, w := range n.cfg.Workers {
		limits[kind] = n.kindConfig(kind, w)
	}
	return n.control.Statuses(ctx, n.broker.JetStream(), n.cfg.Namespace, limits)
}

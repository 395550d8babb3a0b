package ops

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// A command issued with Report comes back to its aggregate as <kind>_done
// or <kind>_failed, recorded as a decision whose idempotency key is
// wire.DoneKey or wire.FailedKey of the command id and whose id only the
// worker's report produces (wire.OutcomeOf). Reading those decisions
// tells the operator tools what an aggregate was told: a dead letter whose
// aggregate was told it failed must not be re-driven lightly (the aggregate
// may have compensated), and an effect that completes after that is an
// orphan effect the aggregate will never take into account.

// ReportedOutcome is a command's outcome as recorded in its aggregate's log.
type ReportedOutcome struct {
	Outcome    string    `json:"outcome"` // wire.OutcomeDone or wire.OutcomeFailed
	DecisionID string    `json:"decision_id"`
	Seq        uint64    `json:"seq"` // EVENTS sequence of the outcome decision
	Time       time.Time `json:"time"`
}

// reportedOutcome says whether rec records the reported outcome of a
// command, and of which. A client's own command carrying the same key and
// causation id is not one: space is the namespace's wire.OutcomeSpace.
func reportedOutcome(space uuid.UUID, rec streams.Record) (commandID string, out ReportedOutcome, ok bool) {
	id, outcome, ok := wire.OutcomeOf(space, rec)
	if !ok {
		return "", ReportedOutcome{}, false
	}
	return id, ReportedOutcome{Outcome: outcome, DecisionID: rec.ID, Seq: rec.Seq, Time: rec.Stored.UTC()}, true
}

// outcomesIn returns what recs (one aggregate's log, its ids made in id
// space ns: [streams.Log.IDSpace]) recorded about command id, oldest first.
func outcomesIn(ns string, recs []streams.Record, id string) []ReportedOutcome {
	var out []ReportedOutcome
	space := wire.OutcomeSpace(ns)
	for _, rec := range recs {
		if cid, o, ok := reportedOutcome(space, rec); ok && cid == id {
			out = append(out, o)
		}
	}
	return out
}

// reportedOutcomes reads command id's aggregate and returns the outcomes it
// recorded for the command. An aggregate with no events has none.
func reportedOutcomes(ctx context.Context, log *streams.Log, id string) ([]ReportedOutcome, error) {
	ref, err := wire.ParseCommandID(id)
	if err != nil {
		return nil, err
	}
	recs, err := log.Load(ctx, ref.AggregateType, ref.AggregateID, streams.Position{})
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", ref.AggregateType, ref.AggregateID, err)
	}
	return outcomesIn(log.IDSpace(), recs, id), nil
}

// toldFailed returns the decision that told id's aggregate the command
// failed, if any.
func toldFailed(outcomes []ReportedOutcome) (ReportedOutcome, bool) {
	for _, o := range outcomes {
		if o.Outcome == wire.OutcomeFailed {
			return o, true
		}
	}
	return ReportedOutcome{}, false
}

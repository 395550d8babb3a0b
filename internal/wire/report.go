package wire

import (
	"encoding/json"
	"errors"
)

// Report is one outcome of a command going back to the aggregate that
// issued it: what a worker hands its feedback (the aggregate's outcome path
// on the node, or at an edge hub the OUTCOMES stream, where it is the
// message body a site pulls and applies — [Report.Encode], [DecodeReport]).
// Its JSON keeps the Go field names: hubs and sites of different builds read
// each other's.
type Report struct {
	AggregateType, AggregateID string
	Kind                       string // <kind>_done or <kind>_failed ([DoneKind], [FailedKind])
	Payload                    []byte // an [Outcome] as JSON
	IdempotencyKey             string // [DoneKey] or [FailedKey] of the command id
	CorrelationID, CausationID string
	// TraceParent is the reporting worker's span: the outcome decision's
	// parent where the report travels without its ctx (an edge hub's
	// outcome, pulled by the site).
	TraceParent string `json:",omitempty"`
	// DecisionID is the decision that emitted the command (for the log
	// lines of an edge site applying a hub's outcome).
	DecisionID string `json:",omitempty"`
}

// Encode is the report as an OUTCOMES message body. Report has no field
// that can fail to marshal.
func (r Report) Encode() []byte {
	b, _ := json.Marshal(r)
	return b
}

// DecodeReport reads an OUTCOMES message body.
func DecodeReport(data []byte) (Report, error) {
	var r Report
	err := json.Unmarshal(data, &r)
	return r, err
}

// ErrReportRefused wraps an error of a report that no retry will change
// (the aggregate refused the outcome, or no one can take it): the worker
// records the refusal in the command's receipt and acks the command. It is
// the contract between the worker that reports and whoever takes the
// report (internal/aggregate's Feedback, an edge hub's).
var ErrReportRefused = errors.New("wire: outcome refused by the aggregate")

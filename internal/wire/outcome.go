package wire

import (
	"encoding/json"
	"strings"

	"github.com/google/uuid"
)

// DoneKind and FailedKind name the result commands of a command kind: a
// worker reports a command's outcome to the issuing aggregate as one of
// these, with [DoneKey] or [FailedKey] as the idempotency key.
func DoneKind(kind string) string   { return kind + doneSuffix }
func FailedKind(kind string) string { return kind + failedSuffix }

const (
	doneSuffix   = "_" + OutcomeDone
	failedSuffix = "_" + OutcomeFailed
)

// ParseOutcomeKind reads a kind made by [DoneKind] or [FailedKind]: the
// issued command's kind and [OutcomeDone] or [OutcomeFailed]; ok is false
// for any other kind.
func ParseOutcomeKind(kind string) (of, outcome string, ok bool) {
	if of, found := strings.CutSuffix(kind, doneSuffix); found && of != "" {
		return of, OutcomeDone, true
	}
	if of, found := strings.CutSuffix(kind, failedSuffix); found && of != "" {
		return of, OutcomeFailed, true
	}
	return "", "", false
}

// DoneKey and FailedKey are the idempotency keys of a command's reported
// outcome: <command id>/done or <command id>/failed. Every report of one
// outcome carries the same key (and the same bytes), so a repeat records
// nothing.
func DoneKey(commandID string) string   { return commandID + "/done" }
func FailedKey(commandID string) string { return commandID + "/failed" }

// Outcome is the payload of a <kind>_done or <kind>_failed command.
type Outcome struct {
	CommandID string          `json:"command_id"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     string          `json:"error,omitempty"`
	Attempts  int             `json:"attempts,omitempty"`
}

// Encode is the outcome's payload. Outcome has no field that can fail to
// marshal (Result is valid JSON or nil).
func (o Outcome) Encode() []byte {
	b, _ := json.Marshal(o)
	return b
}

// DecodeOutcome reads an outcome payload.
func DecodeOutcome(data []byte) (Outcome, error) {
	var o Outcome
	err := json.Unmarshal(data, &o)
	return o, err
}

// ParseOutcomeKey reads an idempotency key made by [DoneKey] or
// [FailedKey]: the command id and [OutcomeDone] or [OutcomeFailed]. The
// decision that records a reported outcome carries it, so a reader of the
// log can tell which commands their aggregate was told about.
func ParseOutcomeKey(key string) (commandID, outcome string, ok bool) {
	if id, found := strings.CutSuffix(key, "/"+OutcomeDone); found && id != "" {
		return id, OutcomeDone, true
	}
	if id, found := strings.CutSuffix(key, "/"+OutcomeFailed); found && id != "" {
		return id, OutcomeFailed, true
	}
	return "", "", false
}

// MetaIDSpace is the EVENTS stream's metadata key naming the namespace
// whose id spaces the log's decisions were made in: decision ids derived
// from idempotency keys ([RequestSpace]) and outcome decision ids
// ([OutcomeSpace]). Absent, it is the stream's own namespace. A restore
// under another name (esjet restore --as) sets it to the archive's, so
// that after the move a retried request still finds its first decision and
// a worker's repeated report of an outcome is still known as a repeat.
const MetaIDSpace = "esjet_id_space"

// IDSpace is the namespace named by an EVENTS stream's metadata
// ([MetaIDSpace]), or ns, the stream's own, when it names none.
func IDSpace(metadata map[string]string, ns string) string {
	if s := metadata[MetaIDSpace]; s != "" {
		return s
	}
	return ns
}

// RequestSpace is the UUID namespace that decision ids derived from
// client idempotency keys are made in, for id space ns ([IDSpace]).
func RequestSpace(ns string) uuid.UUID {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("esjet:"+ns))
}

// OutcomeSpace is the UUID namespace of namespace ns's outcome decision
// ids: apart from the one client idempotency keys derive decision ids in,
// so no client request yields an outcome decision's id.
func OutcomeSpace(ns string) uuid.UUID {
	return uuid.NewSHA1(RequestSpace(ns), []byte("outcome"))
}

// OutcomeDecisionID is the id of the decision recording outcome
// ([OutcomeDone] or [OutcomeFailed]) of command commandID on aggregate
// typ/id, in space ([OutcomeSpace] of the namespace).
func OutcomeDecisionID(space uuid.UUID, typ, id, commandID, outcome string) string {
	return uuid.NewSHA1(space, []byte(typ+"/"+id+"/"+commandID+"/"+outcome)).String()
}

// OutcomeOf says whether rec records a reported outcome, and of which
// command: its idempotency key is [DoneKey] or [FailedKey] of the command,
// its causation id the command id, and its id the [OutcomeDecisionID] in
// space. A client can set the key and the causation id of its own
// commands, not the id: only all three together are the worker's report.
func OutcomeOf(space uuid.UUID, rec Record) (commandID, outcome string, ok bool) {
	commandID, outcome, ok = ParseOutcomeKey(rec.IdempotencyKey)
	if !ok || rec.CausationID != commandID ||
		rec.ID != OutcomeDecisionID(space, rec.AggregateType, rec.AggregateID, commandID, outcome) {
		return "", "", false
	}
	return commandID, outcome, true
}

package wire

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Receipt outcomes.
const (
	OutcomeDone   = "done"   // the handler succeeded; the command is complete
	OutcomeFailed = "failed" // terminally failed or retries exhausted (see the DLQ)
)

// Receipt is what a worker records in the receipts bucket (KV <ns>_receipts,
// key [ReceiptKey]) once a command's outcome is known. A redelivered or
// duplicated command finds it and is folded instead of run again.
type Receipt struct {
	CommandID string `json:"command_id"`
	Kind      string `json:"kind"`
	Outcome   string `json:"outcome"` // OutcomeDone or OutcomeFailed
	// Attempts is how many times the handler ran.
	Attempts int `json:"attempts"`
	// LastError is the last attempt's error ("" when it succeeded).
	LastError string `json:"last_error"`
	// ResultDigest identifies the handler's result (a hash), so a repeated
	// outcome can be told from a different one.
	ResultDigest string `json:"result_digest"`
	// Result is the handler's result, kept so an outcome whose report to
	// the aggregate was lost can be reported again without re-running it.
	Result json.RawMessage `json:"result,omitempty"`
	At     time.Time       `json:"at"`
	// OutcomeRefused is why the command's aggregate refused its reported
	// outcome (Decide rejected it or recorded nothing, or the type does
	// not register that outcome): the aggregate never took the outcome
	// into account, and the command stays awaited there. "" when the
	// outcome was recorded, or not asked for. `esjet reconcile`, `esjet
	// outbox` and the console report it.
	OutcomeRefused string `json:"outcome_refused,omitempty"`
	// DeadLetter is the DLQ sequence of a failed command's dead letter,
	// once written: a later delivery of the command (a copy, or all of
	// OUTBOX again after a restore) finds its failure recorded and writes
	// no second letter, which would reopen one an operator settled.
	DeadLetter uint64 `json:"dead_letter,omitempty"`
}

// Encode is the receipt's KV value.
func (r Receipt) Encode() []byte {
	b, _ := json.Marshal(r) // no field can fail to marshal but Result, which is valid JSON or nil
	return b
}

// DecodeReceipt reads a receipt's KV value. A receipt without a command id
// (written by an older esjet) gets none filled in: callers that know the
// key use [CommandIDFromKey].
func DecodeReceipt(data []byte) (Receipt, error) {
	var r Receipt
	if err := json.Unmarshal(data, &r); err != nil {
		return Receipt{}, fmt.Errorf("receipt is not JSON: %w", err)
	}
	return r, nil
}

// ReceiptKey is the receipts bucket key of a command: its id with ':'
// replaced by '.' (trip:t1:4:0 → trip.t1.4.0). Command id tokens are
// [A-Za-z0-9_-], so the key is a valid KV key and maps back unambiguously.
func ReceiptKey(commandID string) string { return strings.ReplaceAll(commandID, ":", ".") }

// CommandIDFromKey reverses [ReceiptKey].
func CommandIDFromKey(key string) string { return strings.ReplaceAll(key, ".", ":") }

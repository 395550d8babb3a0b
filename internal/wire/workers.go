package wire

import "strings"

// The workers' flow control lives in KV <ns>_workers (streams.Names.Workers),
// shared by every node serving a kind:
//
//	pause.<kind>                a kind's pause record ([PauseRecord]); the nodes watch pause.>
//	rate.<kind>                 a kind's rate limit: its token bucket, taken by compare-and-set
//	key.<kind>.<key>.<slot>     a call in flight for one concurrency key (slot 0..max-1),
//	                            created with a TTL, purged when the call is over

// PauseKey is the key of kind's pause record.
func PauseKey(kind string) string { return "pause." + kind }

// PauseWatch is the filter the nodes watch for pause records.
const PauseWatch = "pause.>"

// KindOfPauseKey is the kind a pause record's key names ("" if key is not one).
func KindOfPauseKey(key string) string {
	kind, ok := strings.CutPrefix(key, "pause.")
	if !ok || strings.Contains(kind, ".") {
		return ""
	}
	return kind
}

// RateKey is the key of kind's token bucket.
func RateKey(kind string) string { return "rate." + kind }

// PauseRecord is the value of a pause key: whether the kind is paused, who
// paused or resumed it, when and why.
type PauseRecord struct {
	Kind   string `json:"kind"`
	Paused bool   `json:"paused"`
	By     string `json:"by"`
	At     string `json:"at"` // RFC 3339, UTC
	Reason string `json:"reason,omitempty"`
}

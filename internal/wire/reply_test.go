package wire

import (
	"encoding/json"
	"testing"
	"time"
)

// TestTargetRepliesReadBackAsWritten: what a target writes (the demo
// services, a receiver) is what a worker reads, byte for byte as before.
func TestTargetRepliesReadBackAsWritten(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body []byte
		want string
		read TargetReply
	}{
		{SuccessReply(json.RawMessage(`{"ref":"X"}`)), `{"result":{"ref":"X"}}`, TargetReply{Result: json.RawMessage(`{"ref":"X"}`)}},
		{SuccessReply(nil), `{"result":null}`, TargetReply{Result: json.RawMessage(`null`)}},
		{FailureReply("busy", true, false, 200*time.Millisecond), `{"error":"busy","retryable":true,"retry_after_ms":200}`,
			TargetReply{Error: "busy", Retryable: true, RetryAfterMs: 200}},
		{FailureReply("no", false, false, 0), `{"error":"no","retryable":false}`, TargetReply{Error: "no"}},
		{FailureReply("newer", false, true, 0), `{"error":"newer","retryable":false,"stale":true}`, TargetReply{Error: "newer", Stale: true}},
	} {
		if string(tc.body) != tc.want {
			t.Errorf("wrote %s, want %s", tc.body, tc.want)
		}
		var got TargetReply
		if err := json.Unmarshal(tc.body, &got); err != nil || string(got.Result) != string(tc.read.Result) ||
			got.Error != tc.read.Error || got.Retryable != tc.read.Retryable || got.Stale != tc.read.Stale || got.RetryAfterMs != tc.read.RetryAfterMs {
			t.Errorf("read %s as %+v, %v; want %+v", tc.body, got, err, tc.read)
		}
	}
}

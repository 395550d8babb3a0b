package streams

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Each stream and bucket says how long it keeps what it holds, from its
// actual configuration: a receipts bucket with a max age says so.
func TestRetentionSaysHowLongEachStreamKeepsWhat(t *testing.T) {
	t.Parallel()
	objs := Objects("shop", ProvisionConfig{ReceiptsMaxAge: 90 * 24 * time.Hour})
	got := map[string]string{}
	for _, o := range objs {
		r := RetentionOf("shop", o.Config)
		if r.Why == "" {
			t.Errorf("%s: no reason given (%+v)", o.Name, r)
		}
		got[o.Name] = r.Kept
	}
	for name, want := range map[string]string{
		"SHOP_EVENTS":    "forever",
		"SHOP_OUTBOX":    "168h (7d)",
		"SHOP_DLQ":       "open letters forever; settled ones for streams.dlq_settled_max_age",
		"shop_receipts":  "2160h (90d) after the command finished",
		"shop_snapshots": "the last per aggregate",
		"shop_workers":   "while in force (per-key TTLs)",
	} {
		if got[name] != want {
			t.Errorf("%s kept %q, want %q", name, got[name], want)
		}
	}
	if r := RetentionOf("shop", jetstream.StreamConfig{Name: "KV_shop_receipts"}); r.Kept != "forever" {
		t.Errorf("receipts without a max age: kept %q", r.Kept)
	}
	if r := RetentionOf("shop", jetstream.StreamConfig{Name: "KV_shop_view_orders-b"}); r.Why == "" {
		t.Errorf("a view generation's bucket: %+v", r)
	}
	if r := RetentionOf("shop", jetstream.StreamConfig{Name: "ELSE", MaxAge: time.Hour}); r.Kept != "1h" {
		t.Errorf("an unknown stream with a max age: %+v", r)
	}
}

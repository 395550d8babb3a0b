package streams

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// allowAtomic turns atomic publish on for a bucket's stream (KV_<bucket>):
// a KV bucket is created without it, and group commit writes receipts as
// atomic batches (NATS.md: 10174 until the stream allows it). It reports
// the change made, if any.
func allowAtomic(ctx context.Context, js jetstream.JetStream, bucket string) (string, error) {
	name := "KV_" + bucket
	st, err := js.Stream(ctx, name)
	if err != nil {
		return "", fmt.Errorf("look up stream %s: %w", name, err)
	}
	cfg := st.CachedInfo().Config
	if cfg.AllowAtomicPublish {
		return "", nil
	}
	cfg.AllowAtomicPublish = true
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return "", fmt.Errorf("update stream %s (allow_atomic: false → true): %w", name, err)
	}
	return "allow_atomic: false → true", nil
}

// withAtomic applies allowAtomic to the bucket ch names and records the
// change in ch.
func withAtomic(ctx context.Context, js jetstream.JetStream, ch Change) (Change, error) {
	field, err := allowAtomic(ctx, js, ch.Name)
	if err != nil || field == "" {
		return ch, err
	}
	if ch.Action == "unchanged" {
		ch.Action = "updated"
	}
	if ch.Action == "updated" {
		ch.Fields = append(ch.Fields, field)
	}
	return ch, nil
}

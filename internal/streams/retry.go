package streams

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// provisionPatience is how long provisioning keeps asking JetStream about
// one stream while the answers are transient: no answer in time, no
// responders yet, a cluster without a meta leader or with no peers to
// place replicas on for a moment. Nodes started together on a cluster that
// has just started meet each of these; a restart a moment later worked.
//
// provisionTry is how long one request of provisioning waits for its
// answer before it is asked again. (Variables: a test shortens both.)
var (
	provisionPatience = 60 * time.Second
	provisionTry      = 5 * time.Second
)

// transient reports an answer that may be different a moment later.
func transient(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case 10005, // no suitable peers for placement, yet
			10008, // JetStream system temporarily unavailable (no meta leader)
			10023: // insufficient resources (peers still joining, or one down)
			return true
		}
		return false
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled)
}

// patiently runs op with a fresh deadline of provisionTry each time, until
// it succeeds, fails for good, ctx ends, or provisionPatience has passed;
// then the error says for how long JetStream did not answer and what to
// check.
func patiently(ctx context.Context, op func(ctx context.Context) error) error {
	deadline := time.Now().Add(provisionPatience)
	wait := 100 * time.Millisecond
	for tries := 1; ; tries++ {
		tctx, cancel := context.WithTimeout(ctx, provisionTry)
		err := op(tctx)
		cancel()
		if err == nil || !transient(err) {
			return err
		}
		if ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("JetStream gave no usable answer in %d tries over %s (last: %w); check that every server of the cluster is up and JetStream has a meta leader (nats server report jetstream), then start again",
				tries, time.Since(deadline.Add(-provisionPatience)).Round(time.Second), err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// Patiently runs op as provisioning does its requests: asked again, each
// time with a fresh deadline, while JetStream's answer is transient (no
// answer in time, no responders, no meta leader, no peers yet), for up to a
// minute; then one error says what to check. A node's consumers (the
// relay's, the workers') are made this way: nodes started together on a
// cluster that has just started meet the same moments provisioning does.
func Patiently(ctx context.Context, op func(ctx context.Context) error) error {
	return patiently(ctx, op)
}

// lookupStream is js.Stream, asked again while the answer is transient.
func lookupStream(ctx context.Context, js jetstream.JetStream, name string) (jetstream.Stream, error) {
	var st jetstream.Stream
	err := patiently(ctx, func(ctx context.Context) error {
		var err error
		st, err = js.Stream(ctx, name)
		return err
	})
	return st, err
}

// BindBucket binds the KV bucket the node provisioned a moment ago. On a
// cluster that has just started, the bucket's stream may answer "not
// found" for a moment after another node created it (seen with two nodes
// started together on a new 3-server cluster): that is asked again, with
// the other transient answers, for up to notFoundPatience. A node binds
// the buckets it provisioned at start (snapshots, the workers' control,
// receipts) with it.
func BindBucket(ctx context.Context, js jetstream.JetStream, bucket string) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	deadline := time.Now().Add(notFoundPatience)
	wait := 100 * time.Millisecond
	for {
		err := patiently(ctx, func(ctx context.Context) error {
			var err error
			kv, err = js.KeyValue(ctx, bucket)
			return err
		})
		if !errors.Is(err, jetstream.ErrBucketNotFound) || time.Now().Add(wait).After(deadline) {
			return kv, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// notFoundPatience is how long a bucket just provisioned may answer "not
// found".
const notFoundPatience = 10 * time.Second

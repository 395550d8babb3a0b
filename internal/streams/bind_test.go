package streams

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
)

// TestBindBucketWaitsForABucketThatAppearsAMomentLater: the workers' bucket
// another node has just created may answer "not found" for a moment on a
// new cluster (a second node started with the first on a fresh 3-server
// cluster stopped with "workers' control bucket …: bucket not found"); the
// bind asks again instead of stopping the node, and still says not found
// when the bucket never comes.
func TestBindBucketWaitsForABucketThatAppearsAMomentLater(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.Connect(t, s)
	created := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond) // the other node's create lands later
		_, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "late_workers"})
		created <- err
	}()
	kv, err := BindBucket(t.Context(), js, "late_workers")
	if err != nil || kv == nil {
		t.Fatalf("bind a bucket created 300 ms later: %v", err)
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := BindBucket(t.Context(), js, "never_workers"); err == nil {
		t.Fatal("a bucket that never comes was bound")
	}
	t.Logf("a missing bucket answered not found after %s", time.Since(start).Round(100*time.Millisecond))
}

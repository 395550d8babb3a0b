package projection

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/wire"
)

// TestAnIdleOwnerIsNotFencedByACopyBehind: an owner waiting at the log's
// head looks at its checkpoint by direct get, which a copy of an R3 bucket
// a moment behind can answer with an older checkpoint or none. Here the
// owner's direct gets are answered by a stream that stopped sourcing the
// bucket (what a follower behind answers, made to last): the owner must
// not take that for a reset or a new owner, and must still see both on
// the bucket itself.
func TestAnIdleOwnerIsNotFencedByACopyBehind(t *testing.T) {
	t.Parallel()
	s := natstest.RunServer(t)
	nc, js := natstest.Connect(t, s)
	ctx := t.Context()
	bucket := natstest.Namespace(t) + "_view_c_g1"
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	kvs := wire.KVStream(bucket)
	cp := cpKey(0)
	rev1, err := kv.Put(ctx, cp, []byte(`{"position":1}`))
	if err != nil {
		t.Fatal(err)
	}

	// behind: holds the first checkpoint only; empty: holds none.
	behind := freezeCopy(t, js, "BEHIND_"+bucket, kvs, wire.KVSubject(bucket, cp), 1)
	empty := freezeCopy(t, js, "EMPTY_"+bucket, kvs, wire.KVSubject(bucket, cp), 0)
	rev2, err := kv.Put(ctx, cp, []byte(`{"position":2}`))
	if err != nil {
		t.Fatal(err)
	}
	owner := func(st jetstream.Stream, wrote uint64) *partition {
		return &partition{r: &Runner{js: js}, def: Definition{Name: "c"}, bucket: bucket,
			store: newKVStore(nc, st, bucket), cpRev: wrote}
	}
	for name, st := range map[string]jetstream.Stream{"a copy at the older checkpoint": behind, "a copy with no checkpoint yet": empty} {
		if err := owner(st, rev2).resetUnder(ctx); err != nil {
			t.Errorf("owner at revision %d (older: %d), direct gets answered by %s: %v, want still the owner", rev2, rev1, name, err)
		}
	}

	// Another owner writes: fenced, whoever answers the direct get.
	if _, err := kv.Put(ctx, cp, []byte(`{"position":3}`)); err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]jetstream.Stream{"the bucket": mustStream(t, js, kvs), "a copy behind": behind} {
		if err := owner(st, rev2).resetUnder(ctx); !errors.Is(err, ErrFenced) {
			t.Errorf("after another owner's checkpoint, read through %s: %v, want ErrFenced", name, err)
		}
	}
	// A reset empties the bucket: fenced.
	if err := mustStream(t, js, kvs).Purge(ctx); err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]jetstream.Stream{"the bucket": mustStream(t, js, kvs), "a copy behind": behind} {
		if err := owner(st, rev2).resetUnder(ctx); !errors.Is(err, ErrFenced) {
			t.Errorf("after a reset, read through %s: %v, want ErrFenced", name, err)
		}
	}
}

// freezeCopy makes stream name a copy of src holding want messages on
// subject, then sourcing nothing more.
func freezeCopy(t *testing.T, js jetstream.JetStream, name, src, subject string, want uint64) jetstream.Stream {
	t.Helper()
	ctx := t.Context()
	cfg := jetstream.StreamConfig{Name: name, AllowDirect: true, Sources: []*jetstream.StreamSource{{Name: src}}}
	if want == 0 {
		cfg.Sources[0].FilterSubject = subject + ".nothing_matches"
	}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool {
		_, err := mustStream(t, js, name).GetLastMsgForSubject(ctx, subject)
		return (want == 0) == errors.Is(err, jetstream.ErrMsgNotFound)
	})
	cfg.Sources[0].FilterSubject = subject + ".nothing_matches"
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	return mustStream(t, js, name)
}

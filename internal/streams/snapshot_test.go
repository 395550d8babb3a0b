package streams

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/natstest"
)

// TestSnapshotReaderReadsEachSubjectsLastAsOneCopyHeldThem: one request
// returns the last message of every subject asked for that has one, and
// nothing for the others; none at all is an empty answer, not an error.
func TestSnapshotReaderReadsEachSubjectsLastAsOneCopyHeldThem(t *testing.T) {
	t.Parallel()
	_, js := natstest.Connect(t, natstest.RunServer(t))
	ctx := t.Context()
	name := "SNAP_" + natstest.Namespace(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	r := NewSnapshotReader(js, name)
	defer r.Close()
	got, err := r.Read(ctx, []string{name + ".a"})
	if err != nil || len(got) != 0 {
		t.Fatalf("empty stream: %v, %v; want nothing and no error", got, err)
	}
	for _, s := range []string{"a", "b", "a"} {
		if _, err := js.Publish(ctx, name+"."+s, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	got, err = r.Read(ctx, []string{name + ".a", name + ".b", name + ".c"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[name+".a"].Sequence != 3 || got[name+".b"].Sequence != 2 {
		t.Fatalf("read a, b, c: %v; want a at seq 3, b at seq 2, no c", got)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(ctx, []string{name + ".a"}); err == nil {
		t.Fatal("a read after Close succeeded")
	}
}

package shred

import (
	"testing"

	"github.com/esjet/esjet/internal/natstest"
)

// TestDropAllLeavesNoKeyCached: when the keys bucket's watch ends, Run
// drops every cached key (a forget may have come in the gap), so the next
// read goes to the bucket, and a read begun before the drop caches nothing.
func TestDropAllLeavesNoKeyCached(t *testing.T) {
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv)
	k, err := Open(t.Context(), js, natstest.Namespace(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := k.Ref(t.Context(), "Ivo Ilic")
	if _, _, err := k.Current(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	cached, before := len(k.keys)+len(k.cur), k.epochs[stripe(ref)]
	k.mu.Unlock()
	if cached == 0 {
		t.Fatal("Current cached nothing: the test would prove nothing")
	}
	k.dropAll()
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.keys)+len(k.cur) != 0 || k.epochs[stripe(ref)] == before {
		t.Fatalf("after dropAll: %d keys, %d current versions cached, epoch %d (was %d)", len(k.keys), len(k.cur), k.epochs[stripe(ref)], before)
	}
}

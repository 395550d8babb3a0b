package aggregate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/esjet/esjet/internal/natstest"
	"github.com/esjet/esjet/internal/streams"
)

// The cache evicts the least recently used entries when their estimated
// bytes pass the bound, whatever their count; the newest entry stays even
// when it alone is larger.
func TestCacheEvictsByBytes(t *testing.T) {
	c := newLRU(1000, 3<<20)
	for i := range 10 {
		c.put(fmt.Sprint(i), &entry{stateBytes: 1 << 20}, 0)
	}
	if c.len() != 2 || c.held() > 3<<20 {
		t.Fatalf("%d entries holding %d bytes, want the 2 newest within 3MiB", c.len(), c.held())
	}
	if _, ok := c.get("9"); !ok {
		t.Fatal("the newest entry was evicted")
	}
	if _, ok := c.get("0"); ok {
		t.Fatal("the oldest entry is still cached")
	}
	// An entry that grew is re-counted when put again.
	e, _ := c.get("8")
	e.stateBytes = 2 << 20
	c.put("8", e, 0)
	if c.len() != 1 || c.held() != e.size() {
		t.Fatalf("after growing: %d entries holding %d bytes, want only the grown one (%d)", c.len(), c.held(), e.size())
	}
	big := &entry{stateBytes: 10 << 20}
	c.put("big", big, 0)
	if c.len() != 1 || c.held() != big.size() {
		t.Fatalf("an entry larger than the bound: %d entries, %d bytes", c.len(), c.held())
	}
	c.remove("big")
	if c.len() != 0 || c.held() != 0 {
		t.Fatalf("after remove: %d entries, %d bytes", c.len(), c.held())
	}
}

// A repository with a byte bound keeps fewer aggregates with large events
// than its count bound allows, and what it keeps stays within the bound.
func TestRepositoryCacheStaysWithinItsBytes(t *testing.T) {
	f := newFixture(t, natstest.RunServer(t))
	data := json.RawMessage(`{"amount":1,"pad":"` + strings.Repeat("x", 8<<10) + `"}`)
	for i := range 20 {
		d := streams.Decision{ID: uuid.NewString(), AggregateType: "account", AggregateID: fmt.Sprint("a", i),
			Events: []streams.Event{{Type: "deposited", Data: data}}}
		if _, err := f.log.Append(t.Context(), d, streams.Position{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		bytes      int64
		wantCached func(int) bool
	}{{64 << 10, func(n int) bool { return n > 0 && n < 20 }}, {-1, func(n int) bool { return n == 20 }}} {
		r := f.repo(t, Config{CacheSize: 1000, CacheBytes: tc.bytes})
		for i := range 20 {
			if _, err := r.Get(t.Context(), "account", fmt.Sprint("a", i)); err != nil {
				t.Fatal(err)
			}
		}
		st := r.Stats()
		if !tc.wantCached(st.Cached) || (tc.bytes > 0 && st.CachedBytes > tc.bytes) {
			t.Fatalf("cache bytes %d: %d aggregates cached, holding %d bytes", tc.bytes, st.Cached, st.CachedBytes)
		}
	}
}

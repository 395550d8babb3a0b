package aggregate

import (
	"container/list"
	"hash/fnv"
	"sync"
	"time"

	"github.com/esjet/esjet/internal/streams"
)

// entry is one aggregate's state as the repository holds it. It is only
// read or changed under the aggregate's stripe lock.
type entry struct {
	state any
	pos   streams.Position
	// recent are the aggregate's decisions made with an idempotency key,
	// back to the horizon: decision id → where it is and what asked for it.
	recent map[string]recentDecision
	// oldest is the earliest At in recent (zero when empty).
	oldest time.Time
	// recentSince, when set, says recent is complete only from that time
	// on: a snapshot kept just the newest part (see maxRecentInSnapshot).
	recentSince time.Time
	// outstanding are the commands the aggregate issued with Report whose
	// outcome is not recorded yet: command id → kind (see outcome.go).
	outstanding map[string]string
	// sinceSnapshot counts events folded since the last snapshot.
	sinceSnapshot int
	// snapSeq is the log sequence a cold load would read from: the last
	// snapshot's, else the first event folded (0 before any).
	snapSeq uint64
}

// lru is a bounded map of hot aggregates, least recently used evicted first.
type lru struct {
	mu    sync.Mutex
	max   int
	order *list.List // front = most recent; values are *lruItem
	items map[string]*list.Element
}

type lruItem struct {
	key string
	e   *entry
}

func newLRU(max int) *lru {
	return &lru{max: max, order: list.New(), items: map[string]*list.Element{}}
}

func (c *lru) get(key string) (*entry, bool) {
	if c.max <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*lruItem).e, true
}

func (c *lru) put(key string, e *entry) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		el.Value.(*lruItem).e = e
		c.order.MoveToFront(el)
		return
	}
	c.items[key] = c.order.PushFront(&lruItem{key: key, e: e})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*lruItem).key)
	}
}

func (c *lru) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.order.Remove(el)
		delete(c.items, key)
	}
}

func (c *lru) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// stripes serialise work on one aggregate inside this process, so commands
// to a hot aggregate queue here instead of conflicting in JetStream.
type stripes [1024]sync.Mutex

func (s *stripes) lock(key string) *sync.Mutex { return &s[s.index(key)] }

// index is the stripe of key (HandleAll locks several in index order).
func (s *stripes) index(key string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(len(s)))
}

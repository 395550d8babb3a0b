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
	// stateBytes estimates the state's size: its encoded size when last
	// snapshotted or read from a snapshot, plus the payloads of the events
	// folded since (0 before either).
	stateBytes int
	// archivedSeq is the sequence of the last tombstone folded (0: none):
	// while pos.Seq is still it, the aggregate is archived.
	archivedSeq uint64
}

// archived reports whether e stands at a tombstone: archived, and not
// restored by a decision since.
func (e *entry) archived() bool { return e.archivedSeq != 0 && e.archivedSeq == e.pos.Seq }

// Rough sizes, in bytes, of what an entry holds besides its state (map
// buckets, strings and the LRU's element included).
const (
	entryOverhead        = 400
	recentDecisionBytes  = 200 // a 36-byte id, a 64-byte digest, a time
	outstandingCmdBytes  = 120 // a command id and a kind
	maxEntryEstimateSize = 1 << 40
)

// size estimates the memory e holds.
func (e *entry) size() int64 {
	n := int64(entryOverhead) + int64(e.stateBytes) + int64(len(e.recent))*recentDecisionBytes + int64(len(e.outstanding))*outstandingCmdBytes
	return min(n, maxEntryEstimateSize)
}

// lru is a bounded map of hot aggregates, least recently used evicted
// first: at most max entries and, when maxBytes > 0, about maxBytes of
// them by [entry.size] (the newest entry is kept even when it alone is
// larger).
type lru struct {
	mu       sync.Mutex
	max      int
	maxBytes int64
	bytes    int64
	order    *list.List // front = most recent; values are *lruItem
	items    map[string]*list.Element
	// gen counts the clears (a forget): an entry loaded or decided on
	// before one is not put back after it, or the state a forgotten
	// subject's plaintext was folded into would be cached again.
	gen uint64
}

type lruItem struct {
	key  string
	e    *entry
	size int64 // e.size() when last put
}

func newLRU(max int, maxBytes int64) *lru {
	return &lru{max: max, maxBytes: maxBytes, order: list.New(), items: map[string]*list.Element{}}
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

// generation is the number of clears so far: take it before reading what
// is put.
func (c *lru) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// put caches e under key, or takes its new size when it is cached, and
// evicts the least recently used entries beyond the bounds — unless the
// cache was cleared since generation gen, when e was read.
func (c *lru) put(key string, e *entry, gen uint64) {
	if c.max <= 0 {
		return
	}
	size := e.size()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if el, ok := c.items[key]; ok {
		it := el.Value.(*lruItem)
		c.bytes += size - it.size
		it.e, it.size = e, size
		c.order.MoveToFront(el)
	} else {
		c.items[key] = c.order.PushFront(&lruItem{key: key, e: e, size: size})
		c.bytes += size
	}
	for c.order.Len() > c.max || (c.maxBytes > 0 && c.bytes > c.maxBytes && c.order.Len() > 1) {
		c.evict(c.order.Back())
	}
}

func (c *lru) evict(el *list.Element) {
	it := el.Value.(*lruItem)
	c.order.Remove(el)
	delete(c.items, it.key)
	c.bytes -= it.size
}

func (c *lru) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.evict(el)
	}
}

func (c *lru) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// held is the estimated bytes of the cached entries.
func (c *lru) held() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
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

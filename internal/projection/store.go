package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/esjet/esjet/internal/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// kvStore is one partition's access to a view bucket: documents read
// through a cache (the owner is the bucket's only writer of the keys it
// owns; a concurrent change by another partition is caught by the write's
// expectation), written with the checkpoint in one atomic batch.
type kvStore struct {
	nc     *nats.Conn
	stream jetstream.Stream // KV_<bucket>
	subj   string           // $KV.<bucket>.
	cache  map[string]doc
}

// doc is a committed document as known: its value and its subject's last
// sequence (0: never written), del for a delete marker.
type doc struct {
	value []byte
	rev   uint64
	del   bool
}

// cacheMax bounds the document cache; past it the cache starts over.
const cacheMax = 200_000

func newKVStore(nc *nats.Conn, stream jetstream.Stream, bucket string) *kvStore {
	return &kvStore{nc: nc, stream: stream, subj: wire.KVPrefix(bucket), cache: map[string]doc{}}
}

// read returns the committed document under key.
func (s *kvStore) read(ctx context.Context, key string) (doc, error) {
	if d, ok := s.cache[key]; ok {
		return d, nil
	}
	m, err := s.stream.GetLastMsgForSubject(ctx, s.subj+key)
	var d doc
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return doc{}, fmt.Errorf("read %s: %w", key, err)
	default:
		d = doc{value: m.Data, rev: m.Sequence, del: wire.IsKVDeleteOp(m.Header.Get(wire.HeaderKVOperation))}
	}
	if len(s.cache) >= cacheMax {
		clear(s.cache)
	}
	s.cache[key] = d
	return d, nil
}

// forget drops keys from the cache (after a conflict on them).
func (s *kvStore) forget() { clear(s.cache) }

// Tx is the handler's view of the documents: reads see the batch's own
// writes, writes are kept until the batch is committed with the checkpoint.
// It is not safe for concurrent use.
type Tx struct {
	s       *kvStore
	ctx     context.Context
	pending map[string]*kvWrite
	// read holds the revision of each document the batch read before
	// writing it: its write expects it there.
	read    map[string]uint64
	order   []string
	journal []undo // for dropping one failed event's writes
}

type undo struct {
	key  string
	prev *kvWrite // nil: the key had no pending write
}

func newTx(s *kvStore) *Tx {
	return &Tx{s: s, pending: map[string]*kvWrite{}, read: map[string]uint64{}}
}

// Get reads the document under key into v. found is false when there is
// none (v untouched).
func (tx *Tx) Get(key string, v any) (found bool, err error) {
	b, found, err := tx.GetRaw(key)
	if err != nil || !found {
		return found, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return true, fmt.Errorf("document %s: %w", key, err)
	}
	return true, nil
}

// GetRaw returns the document under key as stored.
func (tx *Tx) GetRaw(key string) ([]byte, bool, error) {
	if err := ValidateKey(key); err != nil {
		return nil, false, err
	}
	return tx.get(key)
}

func (tx *Tx) get(key string) ([]byte, bool, error) {
	if w, ok := tx.pending[key]; ok {
		return w.value, !w.del, nil
	}
	d, err := tx.s.read(tx.ctx, key)
	if err != nil {
		return nil, false, err
	}
	tx.read[key] = d.rev
	return d.value, d.rev > 0 && !d.del, nil
}

// Put stores v (as JSON) under key.
func (tx *Tx) Put(key string, v any) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("document %s: %w", key, err)
	}
	return tx.write(key, b, false)
}

// Delete removes the document under key.
func (tx *Tx) Delete(key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	return tx.write(key, nil, true)
}

// write records a pending write. A document the batch read is expected
// where it was read: changed by someone else meanwhile, it fails the batch
// (which is applied again on fresh documents). A document written without
// being read does not depend on what was there: no expectation, no read.
func (tx *Tx) write(key string, value []byte, del bool) error {
	prev, had := tx.pending[key]
	w := &kvWrite{key: key, value: value, del: del}
	if had {
		w.expect, w.hasExpect = prev.expect, prev.hasExpect
	} else {
		w.expect, w.hasExpect = tx.read[key]
		tx.order = append(tx.order, key)
	}
	tx.journal = append(tx.journal, undo{key: key, prev: prev})
	tx.pending[key] = w
	return nil
}

// mark and rollback drop the writes of one failed event.
func (tx *Tx) mark() int { return len(tx.journal) }

func (tx *Tx) rollback(mark int) {
	for i := len(tx.journal) - 1; i >= mark; i-- {
		u := tx.journal[i]
		if u.prev == nil {
			delete(tx.pending, u.key)
		} else {
			tx.pending[u.key] = u.prev
		}
	}
	tx.journal = tx.journal[:mark]
}

// size is the number of documents the batch writes.
func (tx *Tx) size() int { return len(tx.pending) }

// writes lists the batch's writes in first-written order.
func (tx *Tx) writes() []kvWrite {
	out := make([]kvWrite, 0, len(tx.pending)+1)
	for _, k := range tx.order {
		if w, ok := tx.pending[k]; ok {
			out = append(out, *w)
		}
	}
	return out
}

// reset empties the batch.
func (tx *Tx) reset() {
	clear(tx.pending)
	clear(tx.read)
	tx.order, tx.journal = tx.order[:0], tx.journal[:0]
}

// commit stores the batch's writes and the checkpoint cp, expecting the
// checkpoint key at cpRev (the fence), and returns the checkpoint's new
// revision. On errWrongLast nothing is stored.
func (tx *Tx) commit(ctx context.Context, cpKey string, cp []byte, cpRev uint64) (uint64, error) {
	ws := tx.writes()
	ws = append(ws, kvWrite{key: cpKey, value: cp, expect: cpRev, hasExpect: true})
	first, err := publishWrites(ctx, tx.s.nc, tx.s.subj, ws)
	if err != nil {
		return 0, err
	}
	for i, w := range ws[:len(ws)-1] {
		if len(tx.s.cache) >= cacheMax {
			clear(tx.s.cache)
		}
		tx.s.cache[w.key] = doc{value: w.value, rev: first + uint64(i), del: w.del}
	}
	tx.reset()
	return first + uint64(len(ws)-1), nil
}

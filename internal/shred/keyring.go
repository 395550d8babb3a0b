package shred

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/streams"
	"github.com/esjet/esjet/internal/wire"
)

// Keyring keeps the namespace's data keys in its keys bucket and caches
// them. Safe for concurrent use, and across nodes: a key is created with a
// KV create (one writer wins, the others read the winner's), and a node
// drops what it cached of a subject as soon as its watch sees the subject
// rotated or forgotten ([Keyring.Run]).
type Keyring struct {
	kv     jetstream.KeyValue
	stream jetstream.Stream
	salt   []byte

	mu   sync.Mutex
	keys map[string][]byte // "<ref>.<version>" → key
	cur  map[string]int    // ref → the version new values are sealed under
	// epochs count the drops, per stripe of refs: a key read from the
	// bucket is cached only if no drop of its ref came meanwhile, or a
	// forget's watch event that overtook the read would leave the
	// destroyed key cached for good.
	epochs [64]uint64

	// OnForget, when set, is called after this node learned that a subject
	// was forgotten (here or on another node): drop state cached in
	// plaintext.
	OnForget func(ref string)
}

// dataKey is a data key's record in the bucket.
type dataKey struct {
	Key     []byte    `json:"key"`
	Created time.Time `json:"created"`
}

// Tombstone is a forgotten subject's record: the audit of the forget and
// what tells "forgotten" (erased) from "missing" (an error).
type Tombstone struct {
	Ref     string    `json:"ref"`
	At      time.Time `json:"at"`
	By      string    `json:"by"`
	Through int       `json:"through"` // key versions 1..Through were destroyed
	Erased  int       `json:"erased"`  // key messages securely erased by this forget
}

// BucketStream is the stream of the keys bucket: history 1, and, unlike
// esjet's other buckets, deletes allowed — a forget erases a key's message
// on disk (a secure delete), which a KV delete or purge would not.
func BucketStream(ns string, replicas int) jetstream.StreamConfig {
	sc := streams.BucketStreamConfig(jetstream.KeyValueConfig{
		Bucket: wire.KeysBucket(ns), History: 1, Replicas: replicas, Storage: jetstream.FileStorage,
		Description: "esjet data keys of personal data (crypto-shredding); node only",
	})
	sc.DenyDelete = false
	sc.AllowRollup = false
	return sc
}

// Open opens the namespace's keyring, creating the bucket and its salt
// when missing.
func Open(ctx context.Context, js jetstream.JetStream, ns string, replicas int) (*Keyring, error) {
	return open(ctx, js, ns, replicas, true)
}

func open(ctx context.Context, js jetstream.JetStream, ns string, replicas int, create bool) (*Keyring, error) {
	sc := BucketStream(ns, replicas)
	st, err := js.Stream(ctx, sc.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) && !create {
		return nil, fmt.Errorf("%w: keys bucket %s does not exist", ErrNoBucket, wire.KeysBucket(ns))
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		st, err = js.CreateStream(ctx, sc)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			st, err = js.Stream(ctx, sc.Name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("keys bucket %s: %w", wire.KeysBucket(ns), err)
	}
	kv, err := js.KeyValue(ctx, wire.KeysBucket(ns))
	if err != nil {
		return nil, fmt.Errorf("keys bucket %s: %w", wire.KeysBucket(ns), err)
	}
	k := &Keyring{kv: kv, stream: st, keys: map[string][]byte{}, cur: map[string]int{}}
	if k.salt, err = k.getOrCreate(ctx, wire.KeysSaltKey, func() ([]byte, error) { return randomBytes(32) }); err != nil {
		return nil, fmt.Errorf("keys bucket salt: %w", err)
	}
	return k, nil
}

func randomBytes(n int) ([]byte, error) {
	b := make([]byte, n)
	_, err := rand.Read(b)
	return b, err
}

// getOrCreate returns key's value, creating it with make() when absent;
// racing creators all get the one that won.
func (k *Keyring) getOrCreate(ctx context.Context, key string, make func() ([]byte, error)) ([]byte, error) {
	e, err := k.kv.Get(ctx, key)
	if err == nil {
		return e.Value(), nil
	}
	if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, err
	}
	v, err := make()
	if err != nil {
		return nil, err
	}
	if _, err = k.kv.Create(ctx, key, v); err == nil {
		return v, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, err
	}
	e, err = k.kv.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return e.Value(), nil
}

// Ref is subject's name in the keys bucket and in sealed values: the first
// 128 bits of HMAC-SHA256(salt, subject), hex.
func (k *Keyring) Ref(_ context.Context, subject string) (string, error) {
	m := hmac.New(sha256.New, k.salt)
	m.Write([]byte(subject))
	return hex.EncodeToString(m.Sum(nil)[:16]), nil
}

// Current returns the version and key new values of ref are sealed under:
// the highest version in the bucket, or the first above a forget's, created
// on first use. While a forget is erasing the subject's keys (its tombstone
// covers a key still in the bucket) it returns [ErrForgetting]: a value
// sealed then likely holds what the forget destroys (a command decided on
// the state before it), which must not reach a key that survives; and an
// existing version is never created again once erased.
func (k *Keyring) Current(ctx context.Context, ref string) (int, []byte, error) {
	k.mu.Lock()
	v, ok := k.cur[ref]
	key := k.keys[ref+"."+strconv.Itoa(v)]
	epoch := k.epochs[stripe(ref)]
	k.mu.Unlock()
	if ok && key != nil {
		return v, key, nil
	}
	v, err := k.latest(ctx, ref)
	if err != nil {
		return 0, nil, err
	}
	tomb, err := k.tombstone(ctx, ref)
	if err != nil {
		return 0, nil, err
	}
	switch {
	case v > 0 && v <= tomb.Through:
		return 0, nil, fmt.Errorf("%w: %s", ErrForgetting, ref)
	case v > 0:
		key, err = k.existing(ctx, ref, v)
	default:
		v = tomb.Through + 1
		key, err = k.create(ctx, ref, v)
	}
	if err != nil {
		return 0, nil, err
	}
	k.mu.Lock()
	if k.epochs[stripe(ref)] == epoch {
		k.keys[ref+"."+strconv.Itoa(v)] = key
		k.cur[ref] = v
	}
	k.mu.Unlock()
	return v, key, nil
}

// latest is the highest key version of ref in the bucket, 0 for none.
func (k *Keyring) latest(ctx context.Context, ref string) (int, error) {
	versions, err := k.versions(ctx, ref)
	if err != nil {
		return 0, err
	}
	v := 0
	for _, e := range versions {
		v = max(v, e.v)
	}
	return v, nil
}

type version struct {
	v   int
	rev uint64
}

// versions lists ref's data keys in the bucket.
func (k *Keyring) versions(ctx context.Context, ref string) ([]version, error) {
	l, err := k.kv.ListKeysFiltered(ctx, wire.DataKeyFilter(ref))
	if err != nil {
		return nil, err
	}
	defer func() { _ = l.Stop() }()
	var out []version
	for name := range l.Keys() {
		e, err := k.kv.Get(ctx, name)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // erased meanwhile
		}
		if err != nil {
			return nil, err
		}
		var v int
		if _, err := fmt.Sscanf(name[len(wire.DataKeyKey(ref, 0))-1:], "%d", &v); err != nil || v < 1 {
			continue
		}
		out = append(out, version{v: v, rev: e.Revision()})
	}
	return out, nil
}

// existing reads version v of ref's key, which the bucket listed: gone
// since, a forget erased it ([ErrForgetting]; never created again).
func (k *Keyring) existing(ctx context.Context, ref string, v int) ([]byte, error) {
	e, err := k.kv.Get(ctx, wire.DataKeyKey(ref, v))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %s v%d erased meanwhile", ErrForgetting, ref, v)
	}
	if err != nil {
		return nil, fmt.Errorf("data key %s v%d: %w", ref, v, err)
	}
	var dk dataKey
	if err := json.Unmarshal(e.Value(), &dk); err != nil || len(dk.Key) != 32 {
		return nil, fmt.Errorf("data key %s v%d: unreadable record", ref, v)
	}
	return dk.Key, nil
}

// create makes version v of ref's key (or reads the one another node made).
func (k *Keyring) create(ctx context.Context, ref string, v int) ([]byte, error) {
	raw, err := k.getOrCreate(ctx, wire.DataKeyKey(ref, v), func() ([]byte, error) {
		key, err := randomBytes(32)
		if err != nil {
			return nil, err
		}
		return json.Marshal(dataKey{Key: key, Created: time.Now().UTC()})
	})
	if err != nil {
		return nil, fmt.Errorf("data key %s v%d: %w", ref, v, err)
	}
	var dk dataKey
	if err := json.Unmarshal(raw, &dk); err != nil || len(dk.Key) != 32 {
		return nil, fmt.Errorf("data key %s v%d: unreadable record", ref, v)
	}
	return dk.Key, nil
}

// Key returns version v of ref's key; see [Keys]. A version the subject's
// tombstone covers is forgotten even while its key is still in the bucket
// (a forget writes the tombstone first, then erases the keys): the tombstone
// is read after the key, and the key cached only if no forget's watch event
// came meanwhile, so no node keeps a destroyed key.
func (k *Keyring) Key(ctx context.Context, ref string, v int) ([]byte, error) {
	id := ref + "." + strconv.Itoa(v)
	k.mu.Lock()
	key := k.keys[id]
	epoch := k.epochs[stripe(ref)]
	k.mu.Unlock()
	if key != nil {
		return key, nil
	}
	e, err := k.kv.Get(ctx, wire.DataKeyKey(ref, v))
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("data key %s v%d: %w", ref, v, err)
	}
	tomb, terr := k.tombstone(ctx, ref)
	if terr != nil {
		return nil, terr
	}
	if tomb.Through >= v {
		return nil, ErrForgotten
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s v%d", ErrKeyMissing, ref, v)
	}
	var dk dataKey
	if err := json.Unmarshal(e.Value(), &dk); err != nil || len(dk.Key) != 32 {
		return nil, fmt.Errorf("data key %s v%d: unreadable record", ref, v)
	}
	k.mu.Lock()
	if k.epochs[stripe(ref)] == epoch {
		k.keys[id] = dk.Key
	}
	k.mu.Unlock()
	return dk.Key, nil
}

// tombstone reads ref's tombstone; the zero Tombstone when there is none.
func (k *Keyring) tombstone(ctx context.Context, ref string) (Tombstone, error) {
	e, err := k.kv.Get(ctx, wire.TombstoneKey(ref))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Tombstone{}, nil
	}
	if err != nil {
		return Tombstone{}, fmt.Errorf("tombstone of %s: %w", ref, err)
	}
	var t Tombstone
	if err := json.Unmarshal(e.Value(), &t); err != nil {
		return Tombstone{}, fmt.Errorf("tombstone of %s: %w", ref, err)
	}
	return t, nil
}

// stripe is ref's stripe of Keyring.epochs.
func stripe(ref string) int {
	h := fnv.New32a()
	h.Write([]byte(ref))
	return int(h.Sum32() % uint32(len(Keyring{}.epochs)))
}

// drop forgets what is cached of ref.
// dropAll forgets every cached key, as if every subject had been dropped.
func (k *Keyring) dropAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := range k.epochs {
		k.epochs[i]++
	}
	clear(k.cur)
	clear(k.keys)
}

func (k *Keyring) drop(ref string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.epochs[stripe(ref)]++
	delete(k.cur, ref)
	for id := range k.keys {
		if len(id) > len(ref) && id[:len(ref)] == ref && id[len(ref)] == '.' {
			delete(k.keys, id)
		}
	}
}

package archive

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/esjet/esjet/internal/wire"
)

// Store keeps archive objects by name. Put overwrites an object of the
// same name (an archive interrupted before its tombstone writes the same
// name again); Get returns [ErrNotFound] for a name it does not hold.
// Implementations are safe for concurrent use.
type Store interface {
	Put(ctx context.Context, name string, data []byte) error
	Get(ctx context.Context, name string) ([]byte, error)
	// Where names the store for a tombstone and a user: "object:<bucket>"
	// or "dir:<path>".
	Where() string
}

// ErrNotFound is returned by [Store.Get] for a missing object.
var ErrNotFound = errors.New("archive: object not found")

// ObjectStore is a [Store] in a NATS object store bucket (by default the
// namespace's <ns>_archive, [wire.ArchiveBucket]). It opens the bucket on
// first use, creating it only when create is set (the admin's archive
// job; a node only reads).
type ObjectStore struct {
	js       jetstream.JetStream
	bucket   string
	replicas int
	create   bool
	os       jetstream.ObjectStore
}

// NewObjectStore is the object store bucket of namespace ns. create makes
// the bucket (with replicas copies) if it is missing.
func NewObjectStore(js jetstream.JetStream, ns string, replicas int, mode OpenMode) *ObjectStore {
	return &ObjectStore{js: js, bucket: wire.ArchiveBucket(ns), replicas: max(replicas, 1), create: mode == CreateBucket}
}

// OpenMode says whether an [ObjectStore] may create its bucket.
type OpenMode int

const (
	// ReadBucket opens the bucket; a missing one answers [ErrNotFound].
	ReadBucket OpenMode = iota
	// CreateBucket creates the bucket when it is missing.
	CreateBucket
)

func (s *ObjectStore) open(ctx context.Context) (jetstream.ObjectStore, error) {
	if s.os != nil {
		return s.os, nil
	}
	o, err := s.js.ObjectStore(ctx, s.bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) && s.create {
		o, err = s.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: s.bucket, Replicas: s.replicas, Storage: jetstream.FileStorage,
			Description: "esjet archived aggregates: one object per archive, named <type>.<id>.<last seq> (docs/archiving.md)"})
		if errors.Is(err, jetstream.ErrBucketExists) {
			o, err = s.js.ObjectStore(ctx, s.bucket)
		}
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w: archive bucket %s does not exist", ErrNotFound, s.bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("archive bucket %s: %w", s.bucket, err)
	}
	s.os = o
	return o, nil
}

func (s *ObjectStore) Put(ctx context.Context, name string, data []byte) error {
	o, err := s.open(ctx)
	if err != nil {
		return err
	}
	if _, err := o.PutBytes(ctx, name, data); err != nil {
		return fmt.Errorf("archive put %s: %w", name, err)
	}
	return nil
}

func (s *ObjectStore) Get(ctx context.Context, name string) ([]byte, error) {
	o, err := s.open(ctx)
	if err != nil {
		return nil, err
	}
	b, err := o.GetBytes(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: %s in %s", ErrNotFound, name, s.bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("archive get %s: %w", name, err)
	}
	return b, nil
}

func (s *ObjectStore) Where() string { return "object:" + s.bucket }

// Dir is a [Store] in a directory: one file per object, <name>.json,
// written to a temporary file, synced and renamed into place.
type Dir string

func (d Dir) path(name string) (string, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return "", fmt.Errorf("archive: bad object name %q", name)
	}
	return filepath.Join(string(d), name+".json"), nil
}

func (d Dir) Put(_ context.Context, name string, data []byte) error {
	p, err := d.path(name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(string(d), 0o750); err != nil {
		return err
	}
	f, err := os.CreateTemp(string(d), ".put-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), p); err != nil {
		return err
	}
	if dir, err := os.Open(string(d)); err == nil { // the rename survives a power loss
		_ = dir.Sync()
		dir.Close()
	}
	return nil
}

func (d Dir) Get(_ context.Context, name string) ([]byte, error) {
	p, err := d.path(name)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, p)
	}
	return b, err
}

func (d Dir) Where() string { return "dir:" + string(d) }

package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// LockFileName is the file in a data directory whose OS lock marks the
// directory as owned by one running process.
const LockFileName = "esjet.lock"

// Holder is what the owner of a data directory writes into its lock file, so
// a process refused the directory can say who has it.
type Holder struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"`
	// Listen is the owner's client address ("" until known, "none" when it
	// accepts no outside clients).
	Listen string `json:"listen"`
	// Program says what holds the directory: "esjet run", "esjet server".
	Program string `json:"program,omitempty"`
}

// String is the holder as an error message names it.
func (h Holder) String() string {
	if h.PID == 0 {
		return "another process (it has not written its details yet)"
	}
	var b strings.Builder
	prog := h.Program
	if prog == "" {
		prog = "process"
	}
	fmt.Fprintf(&b, "%s pid %d", prog, h.PID)
	if h.Host != "" {
		fmt.Fprintf(&b, " on host %s", h.Host)
	}
	if !h.Started.IsZero() {
		fmt.Fprintf(&b, ", started %s", h.Started.Format(time.RFC3339))
	}
	if h.Listen != "" {
		fmt.Fprintf(&b, ", listening on %s", h.Listen)
	}
	return b.String()
}

// NewHolder describes this process as program, listening on listen.
func NewHolder(program, listen string) Holder {
	host, _ := os.Hostname()
	return Holder{PID: os.Getpid(), Host: host, Started: time.Now().UTC().Truncate(time.Second), Listen: listen, Program: program}
}

// DirLock is the exclusive ownership of a data directory: an OS lock (flock)
// on its lock file, held until [DirLock.Release] or the process's death — the
// kernel drops it when the process dies however it dies, so a lock file left
// by a killed process never blocks a restart.
type DirLock struct {
	path string
	mu   sync.Mutex
	f    *os.File // nil once released
}

// LockDataDir takes the data directory dir for this process (creating dir
// if needed) and records holder in its lock file. It fails with a
// [*DataDirLockedError] (matching [ErrDataDirLocked]) when another process,
// or another broker in this one, holds it. Take it before anything opens the
// directory's store: two nats-servers on one store lose acknowledged writes.
func LockDataDir(dir string, holder Holder) (*DirLock, error) {
	// Before anything is created in a store another server owns; and again
	// once this lock is held, so of two started at once neither runs.
	if err := checkOverlap(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	path := filepath.Join(dir, LockFileName)
	// Never O_TRUNC: the file may be the holder's, with its details in it.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open data dir lock %s: %w", path, err)
	}
	if err := tryLock(f); err != nil {
		_ = f.Close()
		if errors.Is(err, errLockHeld) {
			return nil, &DataDirLockedError{Dir: dir, LockFile: path, Holder: readHolder(path)}
		}
		return nil, fmt.Errorf("lock data dir %s: %w", dir, err)
	}
	l := &DirLock{path: path, f: f}
	if err := checkOverlap(dir); err != nil {
		_ = l.Release()
		return nil, err
	}
	if err := l.Update(holder); err != nil {
		_ = l.Release()
		return nil, err
	}
	return l, nil
}

// checkOverlap refuses a data dir whose store another data dir's server
// would share. A nats-server given data dir D keeps its store in
// D/jetstream, and when that is empty it moves what looks like a store
// from D into it. So D and D/jetstream are two locks but one store: a
// server on D/jetstream (the path a node's log prints as its store
// directory) takes a running node's store on D from under it. dir's
// parent, when dir is named jetstream, and dir/jetstream are checked for a
// lock that is held.
func checkOverlap(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("data dir %s: %w", dir, err)
	}
	near := []string{filepath.Join(abs, jetStreamDir)}
	if filepath.Base(abs) == jetStreamDir {
		near = append(near, filepath.Dir(abs))
	}
	for _, other := range near {
		path := filepath.Join(other, LockFileName)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			continue // no lock file: no esjet ever held it
		}
		err = tryLock(f)
		_ = f.Close() // drops the lock if this took it
		if errors.Is(err, errLockHeld) {
			return &DataDirLockedError{Dir: other, LockFile: path, Holder: readHolder(path), Overlaps: dir}
		}
	}
	return nil
}

// jetStreamDir is the directory nats-server keeps its store in, inside the
// data dir it is given.
const jetStreamDir = "jetstream"

// Update rewrites the holder's details (once the actual listen address is
// known). A released lock ignores it.
func (l *DirLock) Update(holder Holder) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	data, err := json.Marshal(holder)
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("write data dir lock %s: %w", l.path, err)
	}
	if _, err := l.f.WriteAt(data, 0); err != nil {
		return fmt.Errorf("write data dir lock %s: %w", l.path, err)
	}
	return nil
}

// Path is the lock file's path.
func (l *DirLock) Path() string { return l.path }

// Release gives the directory up: it empties the lock file (the file stays:
// removing it would let a process that opened it a moment ago lock a file no
// one else sees) and drops the lock. It is idempotent.
func (l *DirLock) Release() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	err := l.f.Close() // closing the last descriptor drops the flock
	l.f = nil
	if err != nil {
		return fmt.Errorf("release data dir lock %s: %w", l.path, err)
	}
	return nil
}

// readHolder reads the holder's details from the lock file. The holder writes
// them right after it takes the lock, so a reader racing that write retries
// for a moment before it settles for an unknown holder.
func readHolder(path string) Holder {
	var h Holder
	for range 20 {
		data, err := os.ReadFile(path)
		if err == nil && len(data) > 0 && json.Unmarshal(data, &h) == nil && h.PID != 0 {
			return h
		}
		time.Sleep(10 * time.Millisecond)
	}
	return Holder{}
}

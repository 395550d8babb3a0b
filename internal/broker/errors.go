package broker

import (
	"errors"
	"fmt"
)

// ErrDataDirLocked: another process (or another broker in this one) owns the
// data directory. Returned wrapped in a [*DataDirLockedError].
var ErrDataDirLocked = errors.New("broker: data dir in use")

// errLockHeld is tryLock's "someone else has it".
var errLockHeld = errors.New("lock held")

// DataDirLockedError says which data directory is taken and by whom.
type DataDirLockedError struct {
	Dir      string
	LockFile string
	Holder   Holder
}

func (e *DataDirLockedError) Error() string {
	return fmt.Sprintf("data dir %s is in use by %s (lock %s): two servers on one data dir lose acknowledged writes; "+
		"stop that process first, or give this one its own data dir (--data-dir / nats.embedded.data_dir, or --store-dir for esjet server)",
		e.Dir, e.Holder, e.LockFile)
}

// Unwrap makes the error match [ErrDataDirLocked].
func (e *DataDirLockedError) Unwrap() error { return ErrDataDirLocked }

package broker

import (
	"errors"
	"fmt"
	"strings"
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
	// Overlaps, when set, is the data dir asked for: not Dir itself, but
	// one whose store Dir's server shares (Dir/jetstream, or Dir's parent).
	Overlaps string
}

func (e *DataDirLockedError) Error() string {
	if e.Overlaps != "" {
		return fmt.Sprintf("data dir %s shares its store with data dir %s, which is in use by %s (lock %s): a nats-server keeps its store in "+
			"<data dir>/jetstream, so the two would be one store, and two servers on one store lose acknowledged writes; "+
			"stop that process first, or give this one its own data dir (--data-dir / nats.embedded.data_dir, or --store-dir for esjet server) outside the other's",
			e.Overlaps, e.Dir, e.Holder, e.LockFile)
	}
	return fmt.Sprintf("data dir %s is in use by %s (lock %s): two servers on one data dir lose acknowledged writes; "+
		"stop that process first, or give this one its own data dir (--data-dir / nats.embedded.data_dir, or --store-dir for esjet server)",
		e.Dir, e.Holder, e.LockFile)
}

// Unwrap makes the error match [ErrDataDirLocked].
func (e *DataDirLockedError) Unwrap() error { return ErrDataDirLocked }

// ErrServerTooOld: the NATS server (or the JetStream answering) is older than
// the features esjet relies on. Returned wrapped in a [*ServerTooOldError].
var ErrServerTooOld = errors.New("broker: nats-server too old")

// ServerTooOldError names the server refused, what it runs, the minimum, and
// what needs it.
type ServerTooOldError struct {
	URL     string // the server connected to, credentials redacted
	Version string // its nats-server version (INFO)
	// APILevel is the JetStream API level that answered; LevelTooLow says the
	// refusal is about it (the server connected to may be new enough while
	// the JetStream answering runs an older release).
	APILevel    int
	LevelTooLow bool
	Missing     []string // "<feature> needs <version>" for each feature it lacks
}

func (e *ServerTooOldError) Error() string {
	found := "nats-server " + e.Version
	if e.LevelTooLow {
		found = fmt.Sprintf("nats-server %s whose JetStream answers at API level %d (another cluster member runs an older release)", e.Version, e.APILevel)
	}
	return fmt.Sprintf("%s at %s is too old: esjet needs nats-server %s or later (JetStream API level %d); without it %s. Upgrade every server of the cluster to %s or later",
		found, e.URL, MinServerVersion, MinAPILevel, strings.Join(e.Missing, "; "), MinServerVersion)
}

// Unwrap makes the error match [ErrServerTooOld].
func (e *ServerTooOldError) Unwrap() error { return ErrServerTooOld }

// ErrRole: a role name or its parameters are not usable (see [Roles]).
var ErrRole = errors.New("broker: bad role")

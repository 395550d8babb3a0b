package backup

import "errors"

// The restore's sentinels say "restore:", not the package's name: they are
// what a user of `esjet restore` reads.
var (
	// ErrExists is returned by [Restore] when the target namespace already
	// has objects and Force is not set.
	ErrExists = errors.New("restore: the namespace already has objects on this server")
	// ErrNotAnArchive is returned by [Restore] for input that is not an
	// esjet backup.
	ErrNotAnArchive = errors.New("restore: not an esjet backup archive")
	// ErrCutShort is returned by [Restore] for an archive that ends before
	// its end line (a copy cut short, a backup that did not finish). It
	// wraps io.ErrUnexpectedEOF.
	ErrCutShort = errors.New("restore: the archive ends before its end line (cut short?)")
)

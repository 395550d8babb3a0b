//go:build !unix

package broker

import "os"

// tryLock does not lock where flock does not exist: the directory's
// ownership is not enforced there.
func tryLock(*os.File) error { return nil }

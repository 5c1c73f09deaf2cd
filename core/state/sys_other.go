//go:build !unix

package state

import (
	"errors"
	"os"
)

// errNoFlock: the file backend's lock is an OS file lock, which this
// platform does not offer here; use the etcd backend.
var errNoFlock = errors.New("OS file locks (flock) are not available on this platform: use an etcd:// state")

func flock(*os.File, bool) error { return errNoFlock }

func tryFlock(*os.File, bool) (bool, error) { return false, errNoFlock }

func funlock(*os.File) error { return nil }

func fileIdentity(os.FileInfo) string { return "" }

//go:build !unix

package state

import "os"

// flock is a no-op where advisory locks are not available: the lock file
// alone fences writes, with a small window between its check and the write.
func flock(*os.File, bool) error { return nil }

func funlock(*os.File) error { return nil }

func processAlive(int) bool { return true }

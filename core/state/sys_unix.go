//go:build unix

package state

import (
	"errors"
	"os"
	"syscall"
)

// flock takes an advisory lock on f (exclusive or shared), waiting for it.
func flock(f *os.File, exclusive bool) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// funlock releases flock.
func funlock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// processAlive says whether a process with this pid exists on this host.
// When it cannot tell, it answers true (a lock is never called stale by
// mistake).
func processAlive(pid int) bool {
	if pid <= 0 {
		return true
	}
	err := syscall.Kill(pid, 0)
	return err == nil || !errors.Is(err, syscall.ESRCH)
}

//go:build unix

package project

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// HoldReconcilerLock makes this process the one reconciler of app on the
// file state in dir, for as long as it runs: an OS lock (flock) on
// dir/APP.reconcile, which the kernel releases when the process ends,
// however it ends. With the file backend there is no election: a second
// reconciler would only repeat the first's refreshes, so it is refused,
// naming the one that holds the lock.
func HoldReconcilerLock(dir, app string) (release func(), err error) {
	path := filepath.Join(dir, app+".reconcile")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("reconciler lock %s: %w", path, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		holder, _ := os.ReadFile(path)
		f.Close()
		who := strings.TrimSpace(string(holder))
		if who == "" {
			who = "a process that has not said who it is yet"
		}
		return nil, fmt.Errorf("another reconciler keeps %s running on the state %s (%s): run one per file state, or put the state in etcd, where reconcilers elect a leader and the others stand by (docs/reconcile.md)", app, dir, who)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("reconciler lock %s: flock: %w", path, err)
	}
	host, _ := os.Hostname()
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d on %s since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))), 0)
	}
	return func() {
		_ = f.Truncate(0)
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

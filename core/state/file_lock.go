package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// Lock implements Store. The lock is an OS lock (flock) on APP.lock, held
// for the life of the process: the kernel releases it the moment the holder
// ends, killed or not, in a container or not, so no process is ever guessed
// dead from a PID. The file's content only describes the holder.
func (s *FileStore) Lock(ctx context.Context, app string, info LockInfo) (*Lock, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkApp(app); err != nil {
		return nil, err
	}
	if info.ID == "" {
		info.ID = NewID()
	}
	if info.Created.IsZero() {
		info.Created = time.Now().UTC()
	}
	info.OSLock = true
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("lock info: %w", err)
	}
	data = append(data, '\n')
	lf, prev, err := s.takeLockFile(app)
	if err != nil {
		return nil, err
	}
	lockPath := s.LockPath(app)
	if prev != nil && !prev.OSLock {
		// An older gcompose holds its lock by the file's existence alone:
		// it may be running now.
		lf.Close()
		return nil, &LockedError{App: app, Info: *prev, Hint: fmt.Sprintf(
			"%s was written by an older gcompose, which holds no OS lock: if no such gcompose works on this application, remove it with gcompose unlock %s", lockPath, prev.ID)}
	}
	if err := writeLockContent(lf, data); err != nil {
		lf.Close()
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	fi, err := lf.Stat()
	if err != nil {
		lf.Close()
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	sess, err := s.openSession(app, info)
	if err != nil {
		_ = lf.Truncate(0)
		lf.Close()
		return nil, err
	}
	sess.lockFile = lf
	sess.lockID = fileIdentity(fi)
	s.mu.Lock()
	s.sessions[sessionKey(app, info.ID)] = sess
	s.mu.Unlock()
	l := sess.lock
	l.Scope = "file:" + sess.lockID
	if prev != nil {
		l.Previous = prev
	}
	return &l, nil
}

// takeLockFile opens APP.lock and takes its OS lock without waiting. It
// returns the open file, holding the lock, and what it described before:
// a holder that ended without releasing it (nil when it was released).
func (s *FileStore) takeLockFile(app string) (*os.File, *LockInfo, error) {
	lockPath := s.LockPath(app)
	for attempt := 0; ; attempt++ {
		lf, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("lock %s: %w", lockPath, err)
		}
		got, err := tryFlock(lf, true)
		if err != nil {
			lf.Close()
			return nil, nil, fmt.Errorf("lock %s: %w", lockPath, err)
		}
		if !got && attempt < 5 {
			// Possibly a reader's brief shared probe (LockInfo): look again.
			lf.Close()
			time.Sleep(time.Duration(attempt+1) * 2 * time.Millisecond)
			continue
		}
		if !got {
			lf.Close()
			held, err := s.heldLockInfo(app)
			if err != nil {
				return nil, nil, err
			}
			return nil, nil, &LockedError{App: app, Info: *held, Hint: fileLockHint}
		}
		// The file may have been removed (by hand) between open and flock:
		// a lock on a file that is no longer APP.lock locks nothing.
		if same, err := sameFile(lf, lockPath); err != nil || !same {
			lf.Close()
			if attempt >= 10 {
				return nil, nil, fmt.Errorf("lock %s: the file keeps being replaced", lockPath)
			}
			continue
		}
		prev, err := readLockContent(lf)
		if err != nil {
			lf.Close()
			return nil, nil, fmt.Errorf("lock %s: %w", lockPath, err)
		}
		return lf, prev, nil
	}
}

// fileLockHint ends the message of a file lock held by a live process.
const fileLockHint = "the OS holds it for that process and releases it the moment the process ends, killed or not (--lock-timeout waits for it)"

// heldLockInfo describes the holder of a lock held by another open file.
// A holder writes its description right after taking the lock: it is
// read again for a moment when still empty.
func (s *FileStore) heldLockInfo(app string) (*LockInfo, error) {
	p := s.LockPath(app)
	for i := 0; ; i++ {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("lock file %s: %w", p, err)
		}
		var info LockInfo
		if len(bytes.TrimSpace(data)) > 0 && json.Unmarshal(data, &info) == nil {
			return &info, nil
		}
		if i == 20 {
			return &LockInfo{Holder: "a process that has not described itself (" + p + " is empty)"}, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readLockContent reads the description in a lock file whose OS lock is
// held: nil when empty (released).
func readLockContent(f *os.File) (*LockInfo, error) {
	data, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<20))
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var info LockInfo
	if err := json.Unmarshal(data, &info); err != nil {
		// Cut short by a crash while it was written: its writer is gone.
		return &LockInfo{Holder: "a holder whose description was cut short", OSLock: true}, nil
	}
	return &info, nil
}

// writeLockContent replaces a held lock file's content.
func writeLockContent(f *os.File, data []byte) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt(data, 0)
	return err
}

// sameFile says whether f is still the file at path.
func sameFile(f *os.File, path string) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	pi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(fi, pi), nil
}

// Unlock implements Store: the lock file is emptied (released, not
// abandoned) and closed, which lets its OS lock go.
func (s *FileStore) Unlock(ctx context.Context, l *Lock) error {
	err := s.fenced(l, func(sess *session) error {
		if err := sess.lockFile.Truncate(0); err != nil {
			return fmt.Errorf("unlock %s: %w", s.LockPath(l.App), err)
		}
		return nil
	})
	if sess, serr := s.session(l); serr == nil {
		s.mu.Lock()
		delete(s.sessions, sessionKey(l.App, l.Info.ID))
		s.mu.Unlock()
		sess.syncMu.Lock()
		sess.mu.Lock()
		if !sess.closed {
			// Lines of Apply calls still waiting for their fsync.
			target := sess.written.Load()
			if serr := sess.journal.Sync(); serr == nil {
				sess.synced = target
			} else if err == nil {
				err = fmt.Errorf("state journal %s: fsync: %w", sess.journal.Name(), serr)
			}
			sess.closed = true
			sess.journal.Close()
			sess.lockFile.Close()
		}
		sess.mu.Unlock()
		sess.syncMu.Unlock()
	}
	return err
}

// ForceUnlock implements Store. A lock held by a live process cannot be
// taken from it (the OS holds it until that process ends): ForceUnlock only
// clears a description left by a holder that ended without releasing it, or
// a lock file of an older gcompose that held no OS lock.
func (s *FileStore) ForceUnlock(ctx context.Context, app, lockID string) error {
	if err := checkApp(app); err != nil {
		return err
	}
	p := s.LockPath(app)
	lf, err := os.OpenFile(p, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("unlock: state for app %q is not locked", app)
	}
	if err != nil {
		return fmt.Errorf("unlock %s: %w", p, err)
	}
	defer lf.Close()
	got, err := tryFlock(lf, true)
	if err != nil {
		return fmt.Errorf("unlock %s: %w", p, err)
	}
	if !got {
		held, err := s.heldLockInfo(app)
		if err != nil {
			return fmt.Errorf("unlock: %w", err)
		}
		if held.ID != lockID {
			return fmt.Errorf("unlock: state for app %q is locked with ID %s (by %s), not %s", app, held.ID, held.Who(), lockID)
		}
		return fmt.Errorf("unlock: the lock %s of app %q is held by a running process, %s, for %s: a file lock cannot be taken from a live process; the OS releases it the moment that process ends (stop it, or wait with --lock-timeout)", lockID, app, held.Who(), held.Operation)
	}
	held, err := readLockContent(lf)
	if err != nil {
		return fmt.Errorf("unlock %s: %w", p, err)
	}
	if held == nil {
		return fmt.Errorf("unlock: state for app %q is not locked", app)
	}
	if held.ID != lockID {
		return fmt.Errorf("unlock: state for app %q is locked with ID %s (by %s), not %s", app, held.ID, held.Who(), lockID)
	}
	if err := lf.Truncate(0); err != nil {
		return fmt.Errorf("unlock %s: %w", p, err)
	}
	return nil
}

// LockInfo implements Store: the holder of the OS lock, nil when nobody
// holds it (a description left by a holder that ended is not a lock). A
// lock file of an older gcompose, which held no OS lock, is reported as held.
func (s *FileStore) LockInfo(ctx context.Context, app string) (*LockInfo, error) {
	if err := checkApp(app); err != nil {
		return nil, err
	}
	p := s.LockPath(app)
	lf, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock file %s: %w", p, err)
	}
	defer lf.Close()
	free, err := tryFlock(lf, false)
	if err != nil {
		return nil, fmt.Errorf("lock file %s: %w", p, err)
	}
	if !free {
		return s.heldLockInfo(app)
	}
	defer funlock(lf)
	info, err := readLockContent(lf)
	if err != nil || info == nil || info.OSLock {
		return nil, err
	}
	return info, nil
}

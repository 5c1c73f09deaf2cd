package state

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// openSession opens the journal, replays the state and trims a torn journal
// tail so that appends start on a line boundary.
func (s *FileStore) openSession(app string, info LockInfo) (*session, error) {
	jpath := s.JournalPath(app)
	j, err := os.OpenFile(jpath, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state journal %s: %w", jpath, err)
	}
	sess := &session{lock: Lock{App: app, Info: info}, journal: j}
	if err := flock(j, true); err != nil {
		j.Close()
		return nil, fmt.Errorf("state journal %s: flock: %w", jpath, err)
	}
	defer funlock(j)
	doc, rr, err := s.read(app, j)
	valid := rr.valid
	if err != nil {
		// Kept so that Apply reports it, while a forced Replace (state
		// push) can still repair the state.
		sess.loadErr = err
		sess.doc = NewDocument(app)
		return sess, nil
	}
	size, err := j.Seek(0, io.SeekEnd)
	if err != nil {
		j.Close()
		return nil, fmt.Errorf("state journal %s: %w", jpath, err)
	}
	if valid < size {
		if err := j.Truncate(valid); err != nil {
			j.Close()
			return nil, fmt.Errorf("state journal %s: trimming the torn last line: %w", jpath, err)
		}
		if err := j.Sync(); err != nil {
			j.Close()
			return nil, fmt.Errorf("state journal %s: %w", jpath, err)
		}
		s.log.Warn("state journal: removed a torn last line (a write interrupted by a crash; that change was never reported done)",
			"file", jpath, "bytes", size-valid)
	}
	if rr.unterminated {
		// A whole last line whose newline a crash lost: end it.
		if _, err := j.Write([]byte("\n")); err != nil {
			j.Close()
			return nil, fmt.Errorf("state journal %s: ending its last line: %w", jpath, err)
		}
		valid++
	}
	sess.jlen = valid
	sess.doc = doc
	// A document without a checksum (an older gcompose wrote it) is
	// rewritten with one by this holder's Compact.
	sess.upgrade = !rr.sealed
	s.removeTemps(app)
	return sess, nil
}

// removeTemps removes temp files of atomic writes a crash left behind.
func (s *FileStore) removeTemps(app string) {
	for _, pat := range []string{s.DocPath(app) + ".tmp-*", s.BackupPath(app) + ".tmp-*"} {
		matches, _ := filepath.Glob(pat)
		for _, m := range matches {
			if os.Remove(m) == nil {
				s.log.Warn("state: removed a temp file left by an interrupted write", "file", m)
			}
		}
	}
}

func sessionKey(app, lockID string) string { return app + "/" + lockID }

func (s *FileStore) session(l *Lock) (*session, error) {
	if l == nil {
		return nil, errors.New("state write without a lock")
	}
	s.mu.Lock()
	sess := s.sessions[sessionKey(l.App, l.Info.ID)]
	s.mu.Unlock()
	if sess == nil || sess.lock.App != l.App {
		return nil, fmt.Errorf("state for app %q, lock %s: %w (released, or taken by another store)", l.App, l.Info.ID, ErrLockNotHeld)
	}
	return sess, nil
}

// fenced runs fn holding the session's write mutex and the journal flock,
// after checking that the lock file is still ours.
func (s *FileStore) fenced(l *Lock, fn func(sess *session) error) error {
	sess, err := s.session(l)
	if err != nil {
		return err
	}
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.closed {
		return fmt.Errorf("state for app %q, lock %s: %w (released)", l.App, l.Info.ID, ErrLockNotHeld)
	}
	if err := flock(sess.journal, true); err != nil {
		return fmt.Errorf("state journal %s: flock: %w", sess.journal.Name(), err)
	}
	defer funlock(sess.journal)
	// Holding the OS lock, nobody else can take it; but a lock file
	// removed or replaced by hand would let another process lock a new one.
	if same, err := sameFile(sess.lockFile, s.LockPath(l.App)); err != nil || !same {
		why := "the lock file was removed or replaced"
		if err != nil {
			why = err.Error()
		}
		return fmt.Errorf("state for app %q, lock %s: %w: %s", l.App, l.Info.ID, ErrLockNotHeld, why)
	}
	return fn(sess)
}

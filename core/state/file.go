package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Options configures a store (Open, NewFileStore).
type Options struct {
	// Logger receives warnings (a torn journal line, leftover temp files).
	// Nil means slog.Default().
	Logger *slog.Logger
}

// FileStore keeps state in a directory (see docs/state.md):
//
//	<app>.json         the compacted document (written atomically)
//	<app>.json.backup  the document before the last compaction or replace
//	<app>.journal      changes applied since, one JSON line each, fsynced
//	<app>.lock         the lock: an OS lock (flock) held on it for the life
//	                   of the holder; its content (LockInfo) describes the holder
//
// The OS lock is what excludes: the kernel releases it when its holder ends,
// in a container or not, so no holder is ever guessed dead. Writers also
// hold an advisory flock on the journal while they write, which readers
// take shared so that they never see half of a compaction.
type FileStore struct {
	dir string
	log *slog.Logger

	mu       sync.Mutex
	sessions map[string]*session // by sessionKey
}

// session is what a FileStore knows about a lock it holds.
type session struct {
	mu       sync.Mutex // serializes writes of this lock
	lock     Lock
	lockFile *os.File // APP.lock, its OS lock held until Unlock or Close
	lockID   string   // the lock file's identity (fileIdentity)
	journal  *os.File // open for append; also the writers' flock target
	jlen     int64    // bytes of valid journal
	doc      *Document
	loadErr  error // the state could not be read; only a forced Replace may write
	upgrade  bool  // the document has no checksum: Compact rewrites it with one
	closed   bool  // unlocked: the journal is closed
	written  atomic.Uint64

	syncMu sync.Mutex // taken before mu, never after
	synced uint64     // journal lines known durable (by written count)
}

// NewFileStore opens (creating it if needed) the state directory dir.
func NewFileStore(dir string, opts Options) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory %s: %w", dir, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &FileStore{dir: dir, log: log, sessions: map[string]*session{}}, nil
}

// Dir is the state directory.
func (s *FileStore) Dir() string { return s.dir }

// Close closes the journals of the locks this store holds and lets their OS
// locks go, as the end of the process would: their later writes fail, and
// the next holder finds them ended without a release (Lock.Previous).
func (s *FileStore) Close() error {
	s.mu.Lock()
	sessions := s.sessions
	s.sessions = map[string]*session{}
	s.mu.Unlock()
	var errs []error
	for _, sess := range sessions {
		sess.syncMu.Lock()
		sess.mu.Lock()
		if !sess.closed {
			sess.closed = true
			errs = append(errs, sess.journal.Sync(), sess.journal.Close(), sess.lockFile.Close())
		}
		sess.mu.Unlock()
		sess.syncMu.Unlock()
	}
	return errors.Join(errs...)
}

func (s *FileStore) path(app, suffix string) string { return filepath.Join(s.dir, app+suffix) }

// Paths of an application's files.
func (s *FileStore) DocPath(app string) string     { return s.path(app, ".json") }
func (s *FileStore) JournalPath(app string) string { return s.path(app, ".journal") }
func (s *FileStore) BackupPath(app string) string  { return s.path(app, ".json.backup") }
func (s *FileStore) LockPath(app string) string    { return s.path(app, ".lock") }

// JournalBackupPath is the journal as it was at the last compaction: the
// lines that lead from the backup to the document.
func (s *FileStore) JournalBackupPath(app string) string { return s.path(app, ".journal.backup") }

// RemovedPath is where Remove keeps the document it removed.
func (s *FileStore) RemovedPath(app string) string { return s.path(app, ".json.removed") }

// checkApp refuses names that are not safe as file names.
func checkApp(app string) error {
	if app == "" {
		return errors.New("empty application name")
	}
	if len(app) > 200 || app[0] == '.' || strings.Contains(app, "..") {
		return fmt.Errorf("application name %q is not usable as a state file name", app)
	}
	for _, c := range app {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("application name %q is not usable as a state file name (character %q)", app, c)
		}
	}
	return nil
}

// Apps implements Store: applications with a document or a non-empty
// journal, and those with only traces of a lost document (a backup), which
// Load reports.
func (s *FileStore) Apps(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", s.dir, err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		n := e.Name()
		switch {
		case strings.HasSuffix(n, ".json"):
			seen[strings.TrimSuffix(n, ".json")] = true
		case strings.HasSuffix(n, ".json.backup"):
			seen[strings.TrimSuffix(n, ".json.backup")] = true
		case strings.HasSuffix(n, ".journal"), strings.HasSuffix(n, ".journal.backup"):
			if info, err := e.Info(); err == nil && info.Size() > 0 {
				seen[strings.TrimSuffix(strings.TrimSuffix(n, ".backup"), ".journal")] = true
			}
		}
	}
	apps := make([]string, 0, len(seen))
	for a := range seen {
		if checkApp(a) == nil {
			apps = append(apps, a)
		}
	}
	sort.Strings(apps)
	return apps, nil
}

var _ Store = (*FileStore)(nil)

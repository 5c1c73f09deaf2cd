package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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

// Load implements Store.
func (s *FileStore) Load(ctx context.Context, app string) (*Document, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkApp(app); err != nil {
		return nil, err
	}
	jpath := s.JournalPath(app)
	j, err := os.Open(jpath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		j = nil
	case err != nil:
		return nil, fmt.Errorf("state journal %s: %w", jpath, err)
	default:
		defer j.Close()
		// Shared: no compaction can run between reading the document and
		// reading the journal.
		if err := flock(j, false); err != nil {
			return nil, fmt.Errorf("state journal %s: flock: %w", jpath, err)
		}
		defer funlock(j)
	}
	doc, _, err := s.read(app, j)
	return doc, err
}

// readResult is what read found besides the document.
type readResult struct {
	// valid is the journal's length up to the end of its last complete line.
	valid int64
	// sealed: the document has a checksum, or there is no document.
	sealed bool
	// unterminated: the journal's last line is whole but lacks its newline.
	unterminated bool
}

// read reads the document and replays the journal j (nil: none). Without a
// document, traces of an earlier one (a backup, a rotated journal, a
// journal that does not start at serial 1) are a *MissingDocumentError.
func (s *FileStore) read(app string, j *os.File) (*Document, readResult, error) {
	rr := readResult{sealed: true}
	dpath := s.DocPath(app)
	doc := NewDocument(app)
	data, err := os.ReadFile(dpath)
	docExists := err == nil
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, rr, fmt.Errorf("state document %s: %w", dpath, err)
	default:
		d, sealed, err := DecodeDocument(data)
		if err != nil {
			return nil, rr, fmt.Errorf("state document %s: %v: %w%s", dpath, err, ErrCorrupt, s.recoverHint(app))
		}
		rr.sealed = sealed
		doc = d
		doc.App = app // the file name is the identity (a copied file takes its new name)
	}
	var jdata []byte
	if j != nil {
		if _, err := j.Seek(0, io.SeekStart); err != nil {
			return nil, rr, fmt.Errorf("state journal %s: %w", j.Name(), err)
		}
		if jdata, err = io.ReadAll(j); err != nil {
			return nil, rr, fmt.Errorf("state journal %s: %w", j.Name(), err)
		}
	}
	if !docExists {
		if found := s.traces(app, jdata); len(found) > 0 {
			return nil, rr, &MissingDocumentError{App: app, Where: "state directory " + s.dir, Found: found,
				Aside: "the traces are kept, renamed with the suffix .old-TIME"}
		}
	}
	res, err := replay(doc, jdata, func(line int, n int) {
		s.log.Warn("state journal: ignoring a torn last line (a write interrupted by a crash; that change was never reported done)",
			"file", j.Name(), "line", line, "bytes", n)
	})
	if err != nil {
		return nil, rr, fmt.Errorf("state journal %s: %w%s", j.Name(), err, s.recoverHint(app))
	}
	rr.valid = res.valid
	rr.unterminated = res.unterminated
	return doc, rr, nil
}

// recoverHint ends the message of a state that cannot be read.
func (s *FileStore) recoverHint(app string) string {
	return fmt.Sprintf(" (gcompose state recover --app %s rebuilds the state from what is intact: %s and the journals; see docs/state.md)", app, filepath.Base(s.BackupPath(app)))
}

// traces lists what is left of an application's state when its document
// is missing; journal is APP.journal's content. A journal starting at
// serial 1 is a whole history (a first run stopped before compacting) and
// no trace.
func (s *FileStore) traces(app string, journal []byte) []string {
	var found []string
	bpath := s.BackupPath(app)
	if data, err := os.ReadFile(bpath); err == nil {
		found = append(found, describeDocument(bpath, data))
	}
	jb := s.JournalBackupPath(app)
	if data, err := os.ReadFile(jb); err == nil && len(bytes.TrimSpace(data)) > 0 {
		found = append(found, describeJournal(jb, data))
	}
	if first, ok := firstSerial(journal); ok && first != 1 {
		found = append(found, describeJournal(s.JournalPath(app), journal))
	}
	return found
}

// describeDocument says what a document file holds, for messages.
func describeDocument(path string, data []byte) string {
	var d Document
	if body, _, err := openDocument(data); err == nil && json.Unmarshal(body, &d) == nil {
		return fmt.Sprintf("%s (serial %d, lineage %s, %d resources)", path, d.Serial, d.Lineage, len(d.Resources))
	}
	return path + " (unreadable)"
}

// describeJournal says what a journal file holds, for messages.
func describeJournal(path string, data []byte) string {
	var first, last uint64
	n := 0
	for _, l := range bytes.Split(data, []byte("\n")) {
		var e struct{ Serial uint64 }
		if body, _, err := openLine(l); err == nil && json.Unmarshal(body, &e) == nil {
			if n == 0 {
				first = e.Serial
			}
			last = e.Serial
			n++
		}
	}
	if n == 0 {
		return path + " (no readable line)"
	}
	return fmt.Sprintf("%s (%d lines, serials %d to %d)", path, n, first, last)
}

// firstSerial is the serial of a journal's first complete line.
func firstSerial(journal []byte) (uint64, bool) {
	for _, l := range bytes.Split(journal, []byte("\n")) {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		var e struct{ Serial uint64 }
		body, _, err := openLine(l)
		if err != nil || json.Unmarshal(body, &e) != nil {
			return 0, false
		}
		return e.Serial, true
	}
	return 0, false
}

// Apply implements Store: one journal line, appended and fsynced.
//
// Concurrent Apply calls of one lock share fsyncs (group commit): each
// appends its line under the lock, then waits until an fsync that started
// after its append has finished; one fsync makes every line before it
// durable.
func (s *FileStore) Apply(ctx context.Context, l *Lock, changes ...Change) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := time.Now().UTC()
	prepared, err := prepare(changes, now)
	if err != nil {
		return fmt.Errorf("state for app %q: %w", lockApp(l), err)
	}
	if len(prepared) == 0 { // nothing to write; still says whether the lock is held
		return s.fenced(l, func(*session) error { return nil })
	}
	// Encoded outside the lock: the costly part of a line.
	encoded, err := json.Marshal(prepared)
	if err != nil {
		return fmt.Errorf("state for app %q: encoding change: %w", lockApp(l), err)
	}
	var (
		sess *session
		seq  uint64
	)
	err = s.fenced(l, func(ss *session) error {
		sess = ss
		if ss.loadErr != nil {
			return fmt.Errorf("state for app %q cannot be written: %w", l.App, ss.loadErr)
		}
		doc := ss.doc
		e := journalLine{Serial: doc.Serial + 1, Lineage: doc.Lineage, LockID: l.Info.ID, Time: now, Changes: encoded}
		if e.Lineage == "" {
			e.Lineage = NewID()
		}
		line, err := e.encode()
		if err != nil {
			return fmt.Errorf("state for app %q: encoding change: %w", l.App, err)
		}
		if _, err := ss.journal.Write(line); err != nil {
			// Cut a partial line so the next append starts clean.
			_ = ss.journal.Truncate(ss.jlen)
			return fmt.Errorf("state journal %s: %w", ss.journal.Name(), err)
		}
		ss.jlen += int64(len(line))
		doc.apply(prepared, now)
		doc.Serial = e.Serial
		doc.Lineage = e.Lineage
		doc.FormatVersion = FormatVersion
		seq = ss.written.Add(1)
		return nil
	})
	if err != nil {
		return err
	}
	return s.syncJournal(sess, seq)
}

// syncJournal returns once the journal line numbered seq is durable.
func (s *FileStore) syncJournal(sess *session, seq uint64) error {
	sess.syncMu.Lock()
	defer sess.syncMu.Unlock()
	if sess.synced >= seq {
		return nil // an fsync that started after our append covered it
	}
	target := sess.written.Load()
	if err := sess.journal.Sync(); err != nil {
		err = fmt.Errorf("state journal %s: fsync: %w", sess.journal.Name(), err)
		// After a failed fsync the file's content is unknown: refuse
		// further writes of this lock rather than build on it.
		sess.mu.Lock()
		if sess.loadErr == nil {
			sess.loadErr = fmt.Errorf("an earlier write failed (%w); take the lock again", err)
		}
		sess.mu.Unlock()
		return err
	}
	sess.synced = target
	return nil
}

func lockApp(l *Lock) string {
	if l == nil {
		return ""
	}
	return l.App
}

// Compact implements Store.
func (s *FileStore) Compact(ctx context.Context, l *Lock) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.fencedSync(l, func(sess *session) error {
		if sess.loadErr != nil {
			return fmt.Errorf("state for app %q cannot be compacted: %w", l.App, sess.loadErr)
		}
		if sess.jlen == 0 && !sess.upgrade {
			return nil
		}
		return s.writeDoc(sess, sess.doc)
	})
}

// fencedSync is fenced for writes that replace the journal: it also waits
// for the Apply calls still syncing it.
func (s *FileStore) fencedSync(l *Lock, fn func(sess *session) error) error {
	sess, err := s.session(l)
	if err != nil {
		return err
	}
	sess.syncMu.Lock()
	defer sess.syncMu.Unlock()
	return s.fenced(l, fn)
}

// writeDoc makes doc the document: the current document becomes the
// backup, doc is written atomically with its checksum, and the journal,
// which holds exactly the lines from the backup to doc, becomes the journal
// backup; a new, empty journal takes its place. So the backup and the
// journal backup always add up to the document (gcompose state recover).
// The caller holds syncMu and mu.
func (s *FileStore) writeDoc(sess *session, doc *Document) error {
	app := sess.lock.App
	body, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("state for app %q: encoding: %w", app, err)
	}
	data := sealDocument(append(body, '\n'))
	if err := sess.journal.Sync(); err != nil {
		return fmt.Errorf("state journal %s: %w", sess.journal.Name(), err)
	}
	if err := s.backup(app); err != nil {
		return err
	}
	dpath := s.DocPath(app)
	if err := writeAtomic(dpath, data); err != nil {
		return fmt.Errorf("state document %s: %w", dpath, err)
	}
	// A crash before this point leaves journal lines that the new
	// document already contains: replay skips them by serial.
	if err := s.rotateJournal(sess); err != nil {
		return err
	}
	sess.upgrade = false
	return nil
}

// rotateJournal renames the journal to the journal backup and opens a new,
// empty one. Readers that opened the old one still read it whole, and skip
// its lines (all in the new document) by serial.
func (s *FileStore) rotateJournal(sess *session) error {
	app := sess.lock.App
	jpath := s.JournalPath(app)
	if err := os.Rename(jpath, s.JournalBackupPath(app)); err != nil {
		return fmt.Errorf("state journal %s: rotating after compaction: %w", jpath, err)
	}
	j, err := os.OpenFile(jpath, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("state journal %s: %w", jpath, err)
	}
	if err := syncDir(s.dir); err != nil {
		j.Close()
		return fmt.Errorf("state journal %s: %w", jpath, err)
	}
	old := sess.journal
	sess.journal = j
	sess.jlen = 0
	old.Close() // lets go of the writers' flock fenced took on it
	return nil
}

// backup makes the current document the backup (a hard link, atomically
// renamed over the old backup; a copy where links are not supported).
func (s *FileStore) backup(app string) error {
	dpath, bpath := s.DocPath(app), s.BackupPath(app)
	if _, err := os.Lstat(dpath); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	tmp := bpath + ".tmp-" + NewID()
	if err := os.Link(dpath, tmp); err != nil {
		data, rerr := os.ReadFile(dpath)
		if rerr != nil {
			return fmt.Errorf("state backup %s: %w", bpath, rerr)
		}
		if err := writeAtomic(bpath, data); err != nil {
			return fmt.Errorf("state backup %s: %w", bpath, err)
		}
		return nil
	}
	if err := os.Rename(tmp, bpath); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("state backup %s: %w", bpath, err)
	}
	return nil
}

// replacement checks a Replace of cur by doc and returns what to store.
func replacement(cur, doc *Document, app string, force bool) (*Document, error) {
	if !force {
		if cur.Lineage != "" && doc.Lineage != "" && doc.Lineage != cur.Lineage {
			return nil, fmt.Errorf("state for app %q: the new document has lineage %s, the stored state %s (a different deployment); use force to overwrite", app, doc.Lineage, cur.Lineage)
		}
		if doc.Serial < cur.Serial {
			return nil, fmt.Errorf("state for app %q: the new document has serial %d, older than the stored %d; use force to overwrite", app, doc.Serial, cur.Serial)
		}
	}
	if doc.FormatVersion > FormatVersion {
		return nil, fmt.Errorf("state for app %q: the new document has format version %d; this gcompose writes %d", app, doc.FormatVersion, FormatVersion)
	}
	next := doc.Clone()
	next.App = app
	next.FormatVersion = FormatVersion
	next.Serial = max(doc.Serial, cur.Serial+1)
	if next.Lineage == "" {
		next.Lineage = cur.Lineage
	}
	if next.Lineage == "" {
		next.Lineage = NewID()
	}
	if next.Resources == nil {
		next.Resources = map[string]*Resource{}
	}
	for name, r := range next.Resources {
		if r == nil {
			return nil, fmt.Errorf("state for app %q: the new document's resource %q is null", app, name)
		}
		r.Name = name
	}
	next.UpdatedAt = time.Now().UTC()
	return next, nil
}

// Replace implements Store: the new document goes into the journal as one
// line, then is compacted, so that the backup (the document before) and
// the journal backup still add up to it.
func (s *FileStore) Replace(ctx context.Context, l *Lock, doc *Document, force bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if doc == nil {
		return errors.New("state replace: nil document")
	}
	return s.fencedSync(l, func(sess *session) error {
		if sess.loadErr != nil {
			var missing *MissingDocumentError
			switch {
			case !force:
				return fmt.Errorf("state for app %q is unreadable (%v); replace it with force", l.App, sess.loadErr)
			case errors.As(sess.loadErr, &missing):
				// A new state over the traces of a lost one: keep them aside.
				if err := s.setAside(sess, missing); err != nil {
					return err
				}
			default:
				// Damaged: keep the document and the journal aside (not as
				// the backup, which stays the last good document) and
				// start a new journal.
				if err := s.setAsideDamaged(sess); err != nil {
					return err
				}
			}
		}
		next, err := replacement(sess.doc, doc, l.App, force)
		if err != nil {
			return err
		}
		line, err := journalLine{Serial: next.Serial, Lineage: next.Lineage, LockID: l.Info.ID, Time: next.UpdatedAt, Replace: next}.encode()
		if err != nil {
			return fmt.Errorf("state for app %q: encoding: %w", l.App, err)
		}
		if _, err := sess.journal.Write(line); err != nil {
			_ = sess.journal.Truncate(sess.jlen)
			return fmt.Errorf("state journal %s: %w", sess.journal.Name(), err)
		}
		sess.jlen += int64(len(line))
		if err := s.writeDoc(sess, next); err != nil {
			return err
		}
		sess.doc = next
		sess.loadErr = nil
		return nil
	})
}

// setAside renames what is left of a lost state (its backup and journals)
// with the suffix .old-TIME, out of the way of a new state but kept.
func (s *FileStore) setAside(sess *session, missing *MissingDocumentError) error {
	app := sess.lock.App
	suffix := ".old-" + time.Now().UTC().Format("20060102T150405.000Z")
	for _, p := range []string{s.BackupPath(app), s.JournalBackupPath(app)} {
		if err := os.Rename(p, p+suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("state for app %q: setting %s aside: %w", app, p, err)
		}
	}
	jpath := s.JournalPath(app)
	if data, err := os.ReadFile(jpath); err == nil && len(data) > 0 {
		if err := writeAtomic(jpath+suffix, data); err != nil {
			return fmt.Errorf("state for app %q: setting %s aside: %w", app, jpath, err)
		}
		if err := sess.journal.Truncate(0); err != nil {
			return fmt.Errorf("state journal %s: %w", jpath, err)
		}
		sess.jlen = 0
	}
	s.log.Info("state: what was left of a lost document is kept with the suffix "+suffix, "app", app, "found", strings.Join(missing.Found, "; "))
	return syncDir(s.dir)
}

// setAsideDamaged renames a damaged document and journal with the suffix
// .damaged-TIME, and opens a new journal.
func (s *FileStore) setAsideDamaged(sess *session) error {
	app := sess.lock.App
	suffix := ".damaged-" + time.Now().UTC().Format("20060102T150405.000Z")
	dpath := s.DocPath(app)
	if err := os.Rename(dpath, dpath+suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("state for app %q: setting %s aside: %w", app, dpath, err)
	}
	jpath := s.JournalPath(app)
	if err := os.Rename(jpath, jpath+suffix); err != nil {
		return fmt.Errorf("state for app %q: setting %s aside: %w", app, jpath, err)
	}
	j, err := os.OpenFile(jpath, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("state journal %s: %w", jpath, err)
	}
	old := sess.journal
	sess.journal, sess.jlen = j, 0
	old.Close()
	s.log.Info("state: the damaged document and journal are kept with the suffix "+suffix, "app", app)
	return syncDir(s.dir)
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

// writeAtomic writes data to path so that path holds either its old
// content or all of data, whatever happens: a temp file in the same
// directory, fsync, rename, fsync of the directory.
func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp-" + NewID()
	if err := writeFileSync(tmp, data); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

// writeFileSync creates path exclusively with data and fsyncs it.
func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir fsyncs a directory so that renames and removals in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

var _ Store = (*FileStore)(nil)

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
//	<app>.lock         the lock: LockInfo as JSON, created exclusively
//
// Writers hold an advisory flock on the journal while they check the lock
// file and write, and ForceUnlock takes the same flock to remove the lock
// file, so a write can never interleave with the lock changing hands.
type FileStore struct {
	dir string
	log *slog.Logger

	mu       sync.Mutex
	sessions map[string]*session // by sessionKey
}

// session is what a FileStore knows about a lock it holds.
type session struct {
	mu        sync.Mutex // serializes writes of this lock
	lock      Lock
	lockBytes []byte   // the lock file content written by Lock
	journal   *os.File // open for append; also the flock target
	jlen      int64    // bytes of valid journal
	doc       *Document
	loadErr   error // the state could not be read; only a forced Replace may write
	closed    bool  // unlocked: the journal is closed
	written   atomic.Uint64

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

// Close closes the journals of the locks this store holds, without
// releasing the locks (their later writes fail; a lock left so is reported
// stale once this process exits).
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
			errs = append(errs, sess.journal.Sync(), sess.journal.Close())
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

// Lock implements Store.
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
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("lock info: %w", err)
	}
	data = append(data, '\n')
	lockPath := s.LockPath(app)
	// Write the whole content to a private file, then link it into place:
	// link fails if the lock exists, and a reader never sees a half-written
	// lock file.
	tmp := lockPath + ".tmp-" + NewID()
	if err := writeFileSync(tmp, data); err != nil {
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	for attempt := 0; ; attempt++ {
		err = linkOrCreate(tmp, lockPath, data)
		if err == nil || !errors.Is(err, fs.ErrExist) {
			break
		}
		held, rerr := s.readLock(app)
		if rerr != nil {
			_ = os.Remove(tmp)
			return nil, fmt.Errorf("state for app %q is locked (%s unreadable: %v)", app, lockPath, rerr)
		}
		if held != nil {
			_ = os.Remove(tmp)
			return nil, &LockedError{App: app, Info: *held, Stale: held.HolderGone()}
		}
		if attempt == 3 { // released and retaken over and over
			_ = os.Remove(tmp)
			return nil, &LockedError{App: app, Info: LockInfo{Holder: "processes that keep taking and releasing it"}}
		}
	}
	_ = os.Remove(tmp)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	if err := syncDir(s.dir); err != nil {
		_ = os.Remove(lockPath)
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	sess, err := s.openSession(app, info, data)
	if err != nil {
		_ = os.Remove(lockPath)
		return nil, err
	}
	s.mu.Lock()
	s.sessions[sessionKey(app, info.ID)] = sess
	s.mu.Unlock()
	l := sess.lock
	return &l, nil
}

// openSession opens the journal, replays the state and trims a torn journal
// tail so that appends start on a line boundary.
func (s *FileStore) openSession(app string, info LockInfo, lockBytes []byte) (*session, error) {
	jpath := s.JournalPath(app)
	j, err := os.OpenFile(jpath, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state journal %s: %w", jpath, err)
	}
	sess := &session{lock: Lock{App: app, Info: info}, lockBytes: lockBytes, journal: j}
	if err := flock(j, true); err != nil {
		j.Close()
		return nil, fmt.Errorf("state journal %s: flock: %w", jpath, err)
	}
	defer funlock(j)
	doc, valid, err := s.read(app, j)
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
	sess.jlen = valid
	sess.doc = doc
	s.removeTemps(app)
	return sess, nil
}

// linkOrCreate links tmp to path, failing with fs.ErrExist if path exists.
// Where hard links are not supported it creates path exclusively with data
// instead (a reader may then see it half-written for an instant).
func linkOrCreate(tmp, path string, data []byte) error {
	err := os.Link(tmp, path)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := writeFileSync(path, data); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			_ = os.Remove(path)
		}
		return err
	}
	return nil
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
	cur, err := os.ReadFile(s.LockPath(l.App))
	if err != nil || !bytes.Equal(cur, sess.lockBytes) {
		why := "the lock file was removed (gcompose unlock?)"
		var other LockInfo
		if err == nil && json.Unmarshal(cur, &other) == nil {
			why = fmt.Sprintf("it is now held by %s for %s, lock ID %s", other.who(), other.Operation, other.ID)
		}
		return fmt.Errorf("state for app %q, lock %s: %w: %s", l.App, l.Info.ID, ErrLockNotHeld, why)
	}
	return fn(sess)
}

// Unlock implements Store.
func (s *FileStore) Unlock(ctx context.Context, l *Lock) error {
	err := s.fenced(l, func(sess *session) error {
		p := s.LockPath(l.App)
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("unlock %s: %w", p, err)
		}
		return syncDir(s.dir)
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
		}
		sess.mu.Unlock()
		sess.syncMu.Unlock()
	}
	return err
}

// ForceUnlock implements Store.
func (s *FileStore) ForceUnlock(ctx context.Context, app, lockID string) error {
	if err := checkApp(app); err != nil {
		return err
	}
	held, err := s.readLock(app)
	if err != nil {
		return fmt.Errorf("unlock: %w (if no gcompose works on app %q, delete that file)", err, app)
	}
	if held == nil {
		return fmt.Errorf("unlock: state for app %q is not locked", app)
	}
	if held.ID != lockID {
		return fmt.Errorf("unlock: state for app %q is locked with ID %s (by %s), not %s", app, held.ID, held.who(), lockID)
	}
	// Take the writers' flock so that no write of the old holder is in
	// between its lock check and its append.
	jpath := s.JournalPath(app)
	j, err := os.OpenFile(jpath, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("unlock: state journal %s: %w", jpath, err)
	}
	defer j.Close()
	if err := flock(j, true); err != nil {
		return fmt.Errorf("unlock: state journal %s: flock: %w", jpath, err)
	}
	defer funlock(j)
	held, err = s.readLock(app)
	if err != nil {
		return err
	}
	if held == nil || held.ID != lockID {
		return fmt.Errorf("unlock: the lock of app %q changed meanwhile; look again (gcompose state lock)", app)
	}
	p := s.LockPath(app)
	if err := os.Remove(p); err != nil {
		return fmt.Errorf("unlock %s: %w", p, err)
	}
	return syncDir(s.dir)
}

// LockInfo implements Store.
func (s *FileStore) LockInfo(ctx context.Context, app string) (*LockInfo, error) {
	if err := checkApp(app); err != nil {
		return nil, err
	}
	return s.readLock(app)
}

// readLock returns the lock file's content, nil when there is none.
func (s *FileStore) readLock(app string) (*LockInfo, error) {
	p := s.LockPath(app)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock file %s: %w", p, err)
	}
	var info LockInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("lock file %s: %w", p, err)
	}
	return &info, nil
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

// read reads the document and replays the journal j (nil: none). It returns
// the journal length up to the end of its last complete entry.
func (s *FileStore) read(app string, j *os.File) (*Document, int64, error) {
	dpath := s.DocPath(app)
	doc := NewDocument(app)
	data, err := os.ReadFile(dpath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, 0, fmt.Errorf("state document %s: %w", dpath, err)
	default:
		if err := json.Unmarshal(data, doc); err != nil {
			return nil, 0, fmt.Errorf("state document %s: %w (the previous version is in %s)", dpath, err, s.BackupPath(app))
		}
		if doc.FormatVersion > FormatVersion {
			return nil, 0, fmt.Errorf("state document %s has format version %d; this gcompose reads up to %d: upgrade gcompose", dpath, doc.FormatVersion, FormatVersion)
		}
		if doc.Resources == nil {
			doc.Resources = map[string]*Resource{}
		}
		doc.App = app // the file name is the identity (a copied file takes its new name)
		for name, r := range doc.Resources {
			if r == nil {
				return nil, 0, fmt.Errorf("state document %s: resource %q is null", dpath, name)
			}
			r.Name = name
		}
	}
	if j == nil {
		return doc, 0, nil
	}
	if _, err := j.Seek(0, io.SeekStart); err != nil {
		return nil, 0, fmt.Errorf("state journal %s: %w", j.Name(), err)
	}
	jdata, err := io.ReadAll(j)
	if err != nil {
		return nil, 0, fmt.Errorf("state journal %s: %w", j.Name(), err)
	}
	valid, err := replay(doc, jdata, func(line int, n int) {
		s.log.Warn("state journal: ignoring a torn last line (a write interrupted by a crash; that change was never reported done)",
			"file", j.Name(), "line", line, "bytes", n)
	})
	if err != nil {
		return nil, 0, fmt.Errorf("state journal %s: %w", j.Name(), err)
	}
	return doc, valid, nil
}

// journalEntry is one line of a journal: one Apply.
type journalEntry struct {
	Serial  uint64    `json:"serial"`
	Lineage string    `json:"lineage"`
	LockID  string    `json:"lock_id,omitempty"`
	Time    time.Time `json:"time"`
	Changes []Change  `json:"changes"`
}

// replay applies the journal data to doc. Entries already in doc (serial
// not above doc.Serial) are skipped; the others must follow one another. An
// incomplete or unparsable last line is reported to torn and ignored; one
// anywhere else is an error. It returns the length of the valid prefix.
func replay(doc *Document, data []byte, torn func(line, bytes int)) (int64, error) {
	var off int64
	line := 0
	for len(data) > 0 {
		line++
		i := bytes.IndexByte(data, '\n')
		if i < 0 { // no newline: the append never completed
			torn(line, len(data))
			return off, nil
		}
		raw := data[:i]
		rest := data[i+1:]
		if len(bytes.TrimSpace(raw)) == 0 {
			off += int64(i + 1)
			data = rest
			continue
		}
		var e journalEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			if len(bytes.TrimSpace(rest)) == 0 {
				torn(line, len(data))
				return off, nil
			}
			return 0, fmt.Errorf("line %d is corrupt (%v) and is not the last one", line, err)
		}
		if e.Serial > doc.Serial {
			if doc.Lineage != "" && e.Lineage != doc.Lineage {
				return 0, fmt.Errorf("line %d: lineage %s differs from the document's %s", line, e.Lineage, doc.Lineage)
			}
			if e.Serial != doc.Serial+1 {
				return 0, fmt.Errorf("line %d: serial %d does not follow %d (a journal entry is missing)", line, e.Serial, doc.Serial)
			}
			for k, ch := range e.Changes {
				if ch.Put == nil && ch.Delete == "" || ch.Put != nil && ch.Put.Name == "" {
					return 0, fmt.Errorf("line %d: change %d is empty or unnamed", line, k)
				}
			}
			doc.apply(e.Changes, e.Time)
			doc.Serial = e.Serial
			doc.Lineage = e.Lineage
			doc.FormatVersion = FormatVersion
		}
		off += int64(i + 1)
		data = rest
	}
	return off, nil
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
		line, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("state for app %q: encoding change: %w", l.App, err)
		}
		line = append(line, '\n')
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

// journalLine is journalEntry with its changes already encoded.
type journalLine struct {
	Serial  uint64          `json:"serial"`
	Lineage string          `json:"lineage"`
	LockID  string          `json:"lock_id,omitempty"`
	Time    time.Time       `json:"time"`
	Changes json.RawMessage `json:"changes"`
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
	return s.fenced(l, func(sess *session) error {
		if sess.loadErr != nil {
			return fmt.Errorf("state for app %q cannot be compacted: %w", l.App, sess.loadErr)
		}
		if sess.jlen == 0 {
			return nil
		}
		return s.writeDoc(sess, sess.doc)
	})
}

// writeDoc makes doc the document: the current one becomes the backup, doc
// is written atomically, and the journal is emptied.
func (s *FileStore) writeDoc(sess *session, doc *Document) error {
	app := sess.lock.App
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("state for app %q: encoding: %w", app, err)
	}
	data = append(data, '\n')
	if err := s.backup(app); err != nil {
		return err
	}
	dpath := s.DocPath(app)
	if err := writeAtomic(dpath, data); err != nil {
		return fmt.Errorf("state document %s: %w", dpath, err)
	}
	// A crash before this point leaves journal entries that the new
	// document already contains: replay skips them by serial.
	if err := sess.journal.Truncate(0); err != nil {
		return fmt.Errorf("state journal %s: emptying after compaction: %w", sess.journal.Name(), err)
	}
	if err := sess.journal.Sync(); err != nil {
		return fmt.Errorf("state journal %s: %w", sess.journal.Name(), err)
	}
	sess.jlen = 0
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

// Replace implements Store.
func (s *FileStore) Replace(ctx context.Context, l *Lock, doc *Document, force bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if doc == nil {
		return errors.New("state replace: nil document")
	}
	return s.fenced(l, func(sess *session) error {
		if sess.loadErr != nil && !force {
			return fmt.Errorf("state for app %q is unreadable (%v); replace it with force", l.App, sess.loadErr)
		}
		next, err := replacement(sess.doc, doc, l.App, force)
		if err != nil {
			return err
		}
		if err := s.writeDoc(sess, next); err != nil {
			return err
		}
		sess.doc = next
		sess.loadErr = nil
		return nil
	})
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

// Apps implements Store: applications with a document or a non-empty journal.
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
		case strings.HasSuffix(n, ".journal"):
			if info, err := e.Info(); err == nil && info.Size() > 0 {
				seen[strings.TrimSuffix(n, ".journal")] = true
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

package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/gcompose/gcompose/internal/atomicfile"
)

// Apply implements Store: one journal line, appended and fsynced.
//
// Concurrent Apply calls of one lock share fsyncs (group commit): each
// appends its line under the lock, then waits until an fsync that started
// after its append has finished; one fsync makes every line before it
// durable.
func (s *FileStore) Apply(ctx context.Context, l *Lock, changes ...Change) error {
	durable, err := s.Append(ctx, l, changes...)
	if err != nil {
		return err
	}
	return durable()
}

var synced = func() error { return nil }

// Append implements Appender: Apply's journal line, appended (written to
// the file, so that a process killed after Append returns loses nothing),
// and durable against a crash of the machine once durable returns, or
// once any later Apply of the lock returns: one fsync makes every line
// before it durable, so a crash keeps a prefix of the lines.
func (s *FileStore) Append(ctx context.Context, l *Lock, changes ...Change) (durable func() error, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	prepared, err := PrepareChanges(changes, now)
	if err != nil {
		return nil, fmt.Errorf("state for app %q: %w", lockApp(l), err)
	}
	if len(prepared) == 0 { // nothing to write; still says whether the lock is held
		return synced, s.fenced(l, func(*session) error { return nil })
	}
	// Encoded outside the lock: the costly part of a line.
	encoded, err := json.Marshal(prepared)
	if err != nil {
		return nil, fmt.Errorf("state for app %q: encoding change: %w", lockApp(l), err)
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
		return nil, err
	}
	return func() error { return s.syncJournal(sess, seq) }, nil
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
	if err := atomicfile.WriteFile(dpath, data); err != nil {
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
	if err := atomicfile.SyncDir(s.dir); err != nil {
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
		if err := atomicfile.WriteFile(bpath, data); err != nil {
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

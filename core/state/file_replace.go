package state

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/gcompose/gcompose/internal/atomicfile"
)

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
		if err := atomicfile.WriteFile(jpath+suffix, data); err != nil {
			return fmt.Errorf("state for app %q: setting %s aside: %w", app, jpath, err)
		}
		if err := sess.journal.Truncate(0); err != nil {
			return fmt.Errorf("state journal %s: %w", jpath, err)
		}
		sess.jlen = 0
	}
	s.log.Info("state: what was left of a lost document is kept with the suffix "+suffix, "app", app, "found", strings.Join(missing.Found, "; "))
	return atomicfile.SyncDir(s.dir)
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
	return atomicfile.SyncDir(s.dir)
}

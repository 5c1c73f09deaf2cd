package state

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/gcompose/gcompose/internal/atomicfile"
)

// Remove deletes the state of l's application (gcompose state mv
// --remove-source): afterwards Load returns an empty document, Apps no
// longer lists the application, and its next write starts a new lineage.
// The lock stays held until Unlock. The file backend keeps the removed
// document as APP.json.removed, and removes the backup and the journal
// backup: a deliberate removal leaves no trace that Load would take for a
// lost document.
func (s *FileStore) Remove(ctx context.Context, l *Lock) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.fencedSync(l, func(sess *session) error {
		if sess.loadErr != nil {
			return fmt.Errorf("state for app %q cannot be removed: %w", l.App, sess.loadErr)
		}
		if sess.doc.Serial == 0 && sess.jlen == 0 {
			return nil
		}
		// Fold the journal in, so that the removed document is the whole state.
		if err := s.writeDoc(sess, sess.doc); err != nil {
			return err
		}
		dpath := s.DocPath(l.App)
		if err := os.Rename(dpath, s.RemovedPath(l.App)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("state for app %q: remove %s: %w", l.App, dpath, err)
		}
		for _, p := range []string{s.BackupPath(l.App), s.JournalBackupPath(l.App)} {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("state for app %q: remove %s: %w", l.App, p, err)
			}
		}
		if err := atomicfile.SyncDir(s.dir); err != nil {
			return fmt.Errorf("state for app %q: %w", l.App, err)
		}
		sess.doc = NewDocument(l.App)
		return nil
	})
}

// Remove deletes the state of l's application (see FileStore.Remove).
func (s *MemoryStore) Remove(ctx context.Context, l *Lock) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.fenced(l, func(a *memApp) error {
		a.doc = NewDocument(l.App)
		return nil
	})
}

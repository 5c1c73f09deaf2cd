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
	"path/filepath"
)

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

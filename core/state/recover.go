package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Recovery is a document rebuilt from what is left of an application's
// state, and how.
type Recovery struct {
	Doc *Document
	// From lists what it was built from, in order ("shop.json.backup
	// (serial 7)", "shop.journal.backup: lines 1-3 (serials 8-10)").
	From []string
	// Lost lists what could not be used (a damaged line and every change
	// after it, a generation nothing points to). Resources named in what
	// was lost are in LostResources: their records may be older than what
	// really exists.
	Lost          []string
	LostResources []string
}

// Recoverer is a store that can rebuild an application's document from
// what is left of it (gcompose state recover). Recover only reads; the
// caller writes the result with Replace, under the lock.
type Recoverer interface {
	Recover(ctx context.Context, app string) (*Recovery, error)
}

// Recover implements Recoverer: the document if it is intact, else the
// backup, then the lines of the journal backup and of the journal that
// follow it, up to the first damaged line or gap.
func (s *FileStore) Recover(ctx context.Context, app string) (*Recovery, error) {
	if err := checkApp(app); err != nil {
		return nil, err
	}
	rec := &Recovery{Doc: NewDocument(app)}
	base := false
	// A damaged document whose serial can still be read is superseded,
	// not lost, when the recovery reaches that serial.
	var damaged []damagedDoc
	for _, p := range []string{s.DocPath(app), s.BackupPath(app)} {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("recover: %w", err)
		}
		d, _, err := DecodeDocument(data)
		if err != nil {
			serial, ok := looseSerial(data)
			damaged = append(damaged, damagedDoc{fmt.Sprintf("%s: %v", filepath.Base(p), err), serial, ok})
			continue
		}
		d.App = app
		rec.Doc = d
		rec.From = append(rec.From, fmt.Sprintf("%s (serial %d, %d resources)", filepath.Base(p), d.Serial, len(d.Resources)))
		base = true
		break
	}
	stopped := false
	for _, p := range []string{s.JournalBackupPath(app), s.JournalPath(app)} {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("recover: %w", err)
		}
		if stopped {
			rec.lose(filepath.Base(p), data, 1, "after a damaged line")
			continue
		}
		if !s.recoverJournal(rec, filepath.Base(p), data, base) {
			stopped = true
		}
		base = base || rec.Doc.Serial > 0
	}
	for _, d := range damaged {
		if d.known && rec.Doc.Serial >= d.serial {
			rec.From = append(rec.From, fmt.Sprintf("(not %s; what it held, up to serial %d, is recovered from the rest)", d.what, d.serial))
		} else {
			rec.Lost = append(rec.Lost, d.what)
		}
	}
	if len(rec.From) == 0 || rec.Doc.Serial == 0 && len(rec.Doc.Resources) == 0 && len(rec.Lost) > 0 {
		return nil, fmt.Errorf("recover: nothing usable of the state of app %q is left in %s: %s", app, s.dir, strings.Join(rec.Lost, "; "))
	}
	sort.Strings(rec.LostResources)
	rec.LostResources = compactStrings(rec.LostResources)
	return rec, nil
}

// recoverJournal applies the lines of one journal file that follow
// rec.Doc, and says whether it got to the end.
func (s *FileStore) recoverJournal(rec *Recovery, name string, data []byte, base bool) bool {
	used, firstUsed, lastUsed := 0, 0, 0
	var fromSerial, toSerial uint64
	note := func() {
		if used > 0 {
			rec.From = append(rec.From, fmt.Sprintf("%s: %d lines (%d to %d, serials %d to %d)", name, used, firstUsed, lastUsed, fromSerial, toSerial))
		}
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, raw := range lines {
		n := i + 1
		raw = bytes.TrimRight(raw, "\n")
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		e, err := decodeLine(raw)
		if err == nil && e.Serial <= rec.Doc.Serial {
			continue // already in the base
		}
		if err == nil && (base || rec.Doc.Serial > 0 || e.Replace != nil || e.Serial == 1) {
			err = applyEntry(rec.Doc, e)
		} else if err == nil {
			err = fmt.Errorf("serial %d, but nothing earlier is left to build on", e.Serial)
		}
		if err != nil {
			note()
			if i == len(lines)-1 && !bytes.HasSuffix(lines[i], []byte("\n")) {
				rec.Lost = append(rec.Lost, fmt.Sprintf("%s line %d: torn by a crash (never reported done)", name, n))
				return true
			}
			rec.Lost = append(rec.Lost, fmt.Sprintf("%s line %d: %v", name, n, err))
			rec.lose(name, data, n, "")
			return false
		}
		if used == 0 {
			firstUsed, fromSerial = n, e.Serial
		}
		used++
		lastUsed, toSerial = n, e.Serial
	}
	note()
	return true
}

// decodeLine reads one journal line: checksum, strict keys.
func decodeLine(raw []byte) (*journalEntry, error) {
	body, _, err := openLine(raw)
	if err != nil {
		return nil, err
	}
	var e journalEntry
	if err := decodeStrict(body, &e); err != nil {
		return nil, columnOnly(err, len(raw)-len(body))
	}
	return &e, nil
}

// lose records the lines of a journal from line from on as lost, with the
// resources they name (read leniently: they may be damaged).
func (r *Recovery) lose(name string, data []byte, from int, why string) {
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if from > len(lines) {
		return
	}
	span := func(a, b int) string {
		if a == b {
			return fmt.Sprintf("line %d", a)
		}
		return fmt.Sprintf("lines %d to %d", a, b)
	}
	if why != "" {
		r.Lost = append(r.Lost, fmt.Sprintf("%s: %s, %s", name, span(from, len(lines)), why))
	} else if from < len(lines) {
		r.Lost = append(r.Lost, fmt.Sprintf("%s: %s, after it", name, span(from+1, len(lines))))
	}
	for _, l := range lines[from-1:] {
		var e struct {
			Changes []struct {
				Put *struct {
					Name string `json:"name"`
				} `json:"put"`
				Delete string `json:"delete"`
			} `json:"changes"`
		}
		if body, _, err := openLine(l); err == nil {
			l = body
		}
		if json.Unmarshal(l, &e) != nil {
			// Too damaged to read: name what looks like resource names.
			for _, m := range namesIn.FindAllSubmatch(l, -1) {
				r.LostResources = append(r.LostResources, string(m[1]))
			}
			continue
		}
		for _, ch := range e.Changes {
			if ch.Put != nil {
				r.LostResources = append(r.LostResources, ch.Put.Name)
			} else if ch.Delete != "" {
				r.LostResources = append(r.LostResources, ch.Delete)
			}
		}
	}
}

func compactStrings(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if x != "" && (i == 0 || x != s[i-1]) {
			out = append(out, x)
		}
	}
	return out
}

// String is the recovery as a report.
func (r *Recovery) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "recovered the state of app %q: lineage %s, serial %d, %d resources\n", r.Doc.App, r.Doc.Lineage, r.Doc.Serial, len(r.Doc.Resources))
	for _, f := range r.From {
		fmt.Fprintf(&b, "  from %s\n", f)
	}
	for _, l := range r.Lost {
		fmt.Fprintf(&b, "  lost %s\n", l)
	}
	if len(r.LostResources) > 0 {
		fmt.Fprintf(&b, "  resources named in what was lost (their records may be older than what exists): %s\n", strings.Join(r.LostResources, ", "))
	}
	return b.String()
}

// namesIn finds "name":"X" in a damaged line.
var namesIn = regexp.MustCompile(`"(?:name|delete)":"([^"\\]+)"`)

// damagedDoc is a document Recover could not use.
type damagedDoc struct {
	what   string
	serial uint64
	known  bool
}

// looseSerial reads the serial of a damaged document, if it still parses.
func looseSerial(data []byte) (uint64, bool) {
	if bytes.HasPrefix(data, []byte(docSumPrefix)) {
		if i := bytes.IndexByte(data[len(docSumPrefix):], '\n'); i >= 0 {
			data = append([]byte("{\n"), data[len(docSumPrefix)+i+1:]...)
		}
	}
	var d struct {
		Serial *uint64 `json:"serial"`
	}
	if json.Unmarshal(data, &d) != nil || d.Serial == nil {
		return 0, false
	}
	return *d.Serial, true
}

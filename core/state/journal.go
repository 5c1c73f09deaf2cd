package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// journalEntry is one line of a journal: one Apply (Changes), or one
// Replace (the whole new document), which state push and state mv write so
// that a backup and the journal after it still add up to the document.
type journalEntry struct {
	Serial  uint64    `json:"serial"`
	Lineage string    `json:"lineage"`
	LockID  string    `json:"lock_id,omitempty"`
	Time    time.Time `json:"time"`
	Changes []Change  `json:"changes,omitempty"`
	Replace *Document `json:"replace,omitempty"`
}

// journalLine is journalEntry as written, its changes already encoded.
type journalLine struct {
	Serial  uint64          `json:"serial"`
	Lineage string          `json:"lineage"`
	LockID  string          `json:"lock_id,omitempty"`
	Time    time.Time       `json:"time"`
	Changes json.RawMessage `json:"changes,omitempty"`
	Replace *Document       `json:"replace,omitempty"`
}

// encode is the line as written: sealed with its checksum, newline-ended.
func (e journalLine) encode() ([]byte, error) {
	b, err := e.marshal()
	if err != nil {
		return nil, err
	}
	return append(sealLine(b), '\n'), nil
}

// marshal is json.Marshal(e), byte for byte. A line of changes (every
// write of a run) is put together here: json.Marshal would scan the
// changes, which json.Marshal made compact and valid, once more to compact
// them (encoding/json does so for every json.RawMessage), for a fifth of
// the CPU of an append.
func (e journalLine) marshal() ([]byte, error) {
	if e.Replace != nil || len(e.Changes) == 0 {
		return json.Marshal(e)
	}
	t, err := e.Time.MarshalJSON()
	if err != nil {
		return json.Marshal(e) // says why, as ever
	}
	b := make([]byte, 0, len(e.Changes)+len(e.Lineage)+len(e.LockID)+len(t)+64)
	b = append(b, `{"serial":`...)
	b = strconv.AppendUint(b, e.Serial, 10)
	b = append(b, `,"lineage":`...)
	b = appendString(b, e.Lineage)
	if e.LockID != "" {
		b = append(b, `,"lock_id":`...)
		b = appendString(b, e.LockID)
	}
	b = append(b, `,"time":`...)
	b = append(b, t...)
	b = append(b, `,"changes":`...)
	b = append(b, e.Changes...)
	return append(b, '}'), nil
}

// appendString appends s as json.Marshal writes it: quoted, and escaped
// when it holds anything but plain ASCII letters, digits and "-_.:" (IDs,
// lineages), which need no escape.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// ErrCorrupt matches (errors.Is) the error of a state whose bytes are not
// what gcompose wrote: a checksum mismatch, an unknown key, a duplicated or
// missing journal line.
var ErrCorrupt = errors.New("state is corrupt")

// replayed is what replay read.
type replayed struct {
	// valid is the length of the journal up to the end of its last
	// complete line (a torn tail is cut there).
	valid int64
	// lines counts the complete lines; first and last are their serials.
	lines       int
	first, last uint64
	// unterminated: the last line is whole but lacks its newline; the next
	// writer adds it.
	unterminated bool
}

// replay applies the journal data to doc. Entries already in doc (serial
// not above doc.Serial) are skipped; the others must follow one another.
// Every line is checked: its checksum (when it has one), its keys, and
// that serials only go up, so a duplicated line is refused. A last line cut
// by a crash (no newline, or zeroes where blocks were not written) is
// reported to torn and ignored; anything else that is not a whole line is
// corruption.
func replay(doc *Document, data []byte, torn func(line, bytes int)) (replayed, error) {
	var r replayed
	line := 0
	for len(data) > 0 {
		line++
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			// No newline: the append never completed (a crash), unless the
			// line is whole and only its newline is missing or damaged.
			switch {
			case wholeLine(data):
				i = len(data)
				r.unterminated = true
			case len(data) > 1 && wholeLine(data[:len(data)-1]):
				return r, fmt.Errorf("line %d: the newline ending it is damaged: %w", line, ErrCorrupt)
			default:
				torn(line, len(data))
				return r, nil
			}
		}
		raw := data[:i]
		rest := data[min(i+1, len(data)):]
		if len(bytes.TrimSpace(raw)) == 0 {
			r.valid += int64(len(data) - len(rest))
			data = rest
			continue
		}
		if !json.Valid(raw) {
			// A crash that persisted the newline but not every block before
			// it leaves zeroes; anything else in the last line is damage.
			if len(bytes.TrimSpace(rest)) == 0 && bytes.IndexByte(raw, 0) >= 0 {
				torn(line, len(data))
				return r, nil
			}
			var probe any
			return r, fmt.Errorf("line %d is not JSON (%v): %w", line, positioned(raw, json.Unmarshal(raw, &probe)), ErrCorrupt)
		}
		body, _, err := openLine(raw)
		if err != nil {
			return r, fmt.Errorf("line %d: %v: %w", line, err, ErrCorrupt)
		}
		var e journalEntry
		if err := decodeStrict(body, &e); err != nil {
			return r, fmt.Errorf("line %d: %v: %w", line, columnOnly(err, len(raw)-len(body)), ErrCorrupt)
		}
		if r.lines > 0 && e.Serial <= r.last {
			what := "goes back"
			if e.Serial == r.last {
				what = "repeats it (a duplicated line)"
			}
			return r, fmt.Errorf("line %d: serial %d after %d %s: %w", line, e.Serial, r.last, what, ErrCorrupt)
		}
		if e.Serial > doc.Serial {
			if err := applyEntry(doc, &e); err != nil {
				return r, fmt.Errorf("line %d: %v: %w", line, err, ErrCorrupt)
			}
		}
		if r.lines == 0 {
			r.first = e.Serial
		}
		r.lines++
		r.last = e.Serial
		r.valid += int64(len(data) - len(rest))
		data = rest
	}
	return r, nil
}

// wholeLine says whether b is a complete journal line with a valid
// checksum (without its newline).
func wholeLine(b []byte) bool {
	if !json.Valid(b) {
		return false
	}
	body, sealed, err := openLine(b)
	if err != nil || !sealed {
		return false
	}
	var e journalEntry
	return decodeStrict(body, &e) == nil
}

// applyEntry applies one journal entry that is newer than doc.
func applyEntry(doc *Document, e *journalEntry) error {
	if e.Replace != nil {
		if e.Changes != nil {
			return errors.New("both changes and a replacement")
		}
		next := e.Replace.Clone()
		if next.Resources == nil {
			next.Resources = map[string]*Resource{}
		}
		for name, r := range next.Resources {
			if r == nil {
				return fmt.Errorf("replacement: resource %q is null", name)
			}
			r.Name = name
		}
		next.App = doc.App
		next.Serial = e.Serial
		next.Lineage = e.Lineage
		next.FormatVersion = FormatVersion
		*doc = *next
		return nil
	}
	if doc.Lineage != "" && e.Lineage != doc.Lineage {
		return fmt.Errorf("lineage %s differs from the document's %s", e.Lineage, doc.Lineage)
	}
	if e.Serial != doc.Serial+1 {
		return fmt.Errorf("serial %d does not follow %d (a journal line is missing)", e.Serial, doc.Serial)
	}
	for k, ch := range e.Changes {
		if ch.Put == nil && ch.Delete == "" || ch.Put != nil && ch.Put.Name == "" {
			return fmt.Errorf("change %d is empty or unnamed", k)
		}
	}
	doc.apply(e.Changes, e.Time)
	doc.Serial = e.Serial
	doc.Lineage = e.Lineage
	doc.FormatVersion = FormatVersion
	return nil
}

// columnOnly turns "line 1, column C" of a one-line body into "column C'"
// of the line as written (shift: the checksum member's length).
func columnOnly(err error, shift int) error {
	return errors.New(columnOnlyText(err.Error(), shift))
}

func columnOnlyText(msg string, shift int) string {
	prefix := ""
	if strings.HasPrefix(msg, "; ") {
		prefix, msg = "; ", msg[2:]
	}
	var col int
	if n, _ := fmt.Sscanf(msg, "line 1, column %d", &col); n == 1 {
		if i := strings.IndexByte(msg, ':'); i >= 0 {
			if col > 1 {
				col += shift
			}
			return fmt.Sprintf("%scolumn %d%s", prefix, col, msg[i:])
		}
	}
	return prefix + msg
}

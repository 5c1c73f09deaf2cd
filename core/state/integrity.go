package state

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/gcompose/gcompose/internal/jsonout"
)

// Checksums. A state file is checked byte for byte, not by decoding and
// encoding again (numbers or key order would not survive that): the
// checksum covers the exact bytes written, with the checksum member cut out.
//
// A document starts with its checksum member, on its own line:
//
//	{
//	  "checksum": "sha256:<64 hex digits>",
//	  "format_version": 1,
//	  ...
//
// and a journal line with its "sum" member:
//
//	{"sum":"sha256:<64 hex digits>","serial":8,...}
//
// Without the member (written by an older gcompose) the bytes are accepted
// as they are; the next holder of the lock rewrites the document with one.

const (
	docSumPrefix  = "{\n  \"checksum\": \""
	lineSumPrefix = "{\"sum\":\""
	sumAlgo       = "sha256:"
)

var sumValue = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return sumAlgo + hex.EncodeToString(h[:])
}

// sealDocument puts the checksum of body (an indented JSON object) at its
// start.
func sealDocument(body []byte) []byte {
	if !bytes.HasPrefix(body, []byte("{\n")) {
		panic("sealDocument: not an indented JSON object")
	}
	out := make([]byte, 0, len(body)+90)
	out = append(out, docSumPrefix...)
	out = append(out, sum(body)...)
	out = append(out, "\",\n"...)
	out = append(out, body[2:]...)
	return out
}

// openDocument checks a document's checksum and returns the bytes it
// covers (the document without its checksum member). sealed is false for
// a document written without one.
func openDocument(data []byte) (body []byte, sealed bool, err error) {
	if !bytes.HasPrefix(data, []byte(docSumPrefix)) {
		return data, false, nil
	}
	rest := data[len(docSumPrefix):]
	end := bytes.IndexByte(rest, '\n')
	if end < 2 || !bytes.HasSuffix(rest[:end], []byte("\",")) {
		return nil, true, errors.New("line 2: the checksum member is damaged")
	}
	want := string(rest[:end-2])
	if !sumValue.MatchString(want) {
		return nil, true, fmt.Errorf("line 2: the checksum %q is damaged", want)
	}
	body = append([]byte("{\n"), rest[end+1:]...)
	if got := sum(body); got != want {
		return nil, true, fmt.Errorf("checksum mismatch: the file changed after gcompose wrote it (a flipped byte, an edit by hand, a disk error)%s", diagnose(body, &Document{}, 1))
	}
	return body, true, nil
}

// diagnose says where in body decoding fails, if it does: a hint at the
// damage a checksum mismatch found. Lines after the first are shifted by
// shift (the checksum line cut out of a document).
func diagnose(body []byte, v any, shift int) string {
	err := decodeStrict(body, v)
	if err == nil {
		return ""
	}
	if shift > 0 {
		err = shiftLines(err, shift)
	}
	return "; " + err.Error()
}

// sealLine puts the checksum of line (a compact JSON object, no newline)
// at its start.
func sealLine(line []byte) []byte {
	out := make([]byte, 0, len(line)+80)
	out = append(out, lineSumPrefix...)
	out = append(out, sum(line)...)
	out = append(out, "\","...)
	out = append(out, line[1:]...)
	return out
}

// openLine checks a journal line's checksum and returns the bytes it covers.
func openLine(raw []byte) (body []byte, sealed bool, err error) {
	if !bytes.HasPrefix(raw, []byte(lineSumPrefix)) {
		return raw, false, nil
	}
	rest := raw[len(lineSumPrefix):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 || len(rest) < end+2 || rest[end+1] != ',' {
		return nil, true, errors.New("its checksum member is damaged")
	}
	want := string(rest[:end])
	if !sumValue.MatchString(want) {
		return nil, true, fmt.Errorf("its checksum %q is damaged", want)
	}
	body = append([]byte("{"), rest[end+2:]...)
	if got := sum(body); got != want {
		return nil, true, fmt.Errorf("checksum mismatch: the line changed after gcompose wrote it (a flipped byte, an edit by hand, a disk error)%s",
			columnOnlyText(diagnose(body, &journalEntry{}, 0), len(raw)-len(body)))
	}
	return body, true, nil
}

// decodeStrict decodes data into v refusing unknown keys, which a typo or
// a flipped byte in a key makes ("stXtus"), and trailing data. The error
// names the line and column (1-based) in data, shifted by lineOffset.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return positioned(data, err)
	}
	if dec.More() {
		off := dec.InputOffset()
		line, col := lineCol(data, int(off))
		return fmt.Errorf("line %d, column %d: data after the end of the JSON value", line, col)
	}
	return nil
}

// unknownField is encoding/json's error for an unknown key, which it
// quotes with %q (Go syntax, not JSON).
var unknownField = regexp.MustCompile(`^json: unknown field (".*")$`)

// positioned adds the line and column of a JSON error in data.
func positioned(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := lineCol(data, int(se.Offset))
		return fmt.Errorf("line %d, column %d: %v", line, col, err)
	case errors.As(err, &te):
		line, col := lineCol(data, int(te.Offset))
		return fmt.Errorf("line %d, column %d: %s: %v", line, col, te.Field, err)
	}
	if m := unknownField.FindStringSubmatch(err.Error()); m != nil {
		name, uerr := strconv.Unquote(m[1])
		if uerr != nil {
			return err
		}
		// Named as typed: HTML-escaped, "a<b" would read "a\u003cb".
		var typed bytes.Buffer
		_ = jsonout.Line(&typed, name)
		key := bytes.TrimSuffix(typed.Bytes(), []byte("\n"))
		// The file has it as typed (a hand edit) or HTML-escaped (as
		// encoding/json writes by default): either is placed.
		escaped, _ := json.Marshal(name)
		for _, form := range [][]byte{key, escaped} {
			if i := keyAt(data, form); i >= 0 {
				line, col := lineCol(data, i)
				return fmt.Errorf("line %d, column %d: unknown key %s", line, col, key)
			}
		}
		return fmt.Errorf("unknown key %s", key)
	}
	return err
}

// keyAt is the offset of the first occurrence in data of the quoted key
// followed by a colon (blanks allowed before it), or -1.
func keyAt(data, quoted []byte) int {
	for from := 0; ; {
		i := bytes.Index(data[from:], quoted)
		if i < 0 {
			return -1
		}
		i += from
		rest := bytes.TrimLeft(data[i+len(quoted):], " \t\r\n")
		if len(rest) > 0 && rest[0] == ':' {
			return i
		}
		from = i + 1
	}
}

// lineCol turns a byte offset into a 1-based line and column.
func lineCol(data []byte, off int) (int, int) {
	off = max(0, min(off, len(data)))
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(data[:off], '\n')
	return line, col
}

// DecodeDocument reads a state document as the file backend writes it
// (also a copy of one, for state push): its checksum, when it has one, must
// match, and unknown keys are refused. sealed says whether it had one.
func DecodeDocument(data []byte) (doc *Document, sealed bool, err error) {
	body, sealed, err := openDocument(data)
	if err != nil {
		return nil, sealed, err
	}
	// A newer format may have keys this build does not know: say so first.
	var v struct {
		FormatVersion int `json:"format_version"`
	}
	if json.Unmarshal(body, &v) == nil && v.FormatVersion > FormatVersion {
		return nil, sealed, fmt.Errorf("format version %d; this gcompose reads up to %d: upgrade gcompose", v.FormatVersion, FormatVersion)
	}
	doc = &Document{}
	if err := decodeStrict(body, doc); err != nil {
		if sealed {
			// Line numbers of body are those of the file minus the checksum line.
			err = shiftLines(err, 1)
		}
		return nil, sealed, err
	}
	if doc.Resources == nil {
		doc.Resources = map[string]*Resource{}
	}
	for name, r := range doc.Resources {
		if r == nil {
			return nil, sealed, fmt.Errorf("resource %q is null", name)
		}
		r.Name = name
	}
	return doc, sealed, nil
}

var linePrefix = regexp.MustCompile(`^line (\d+)`)

// shiftLines renumbers "line N" (N > 1) in a body's error by the lines cut
// out of the file before the body's second line.
func shiftLines(err error, shift int) error {
	m := linePrefix.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	var n int
	fmt.Sscan(m[1], &n)
	if n > 1 {
		n += shift
	}
	return fmt.Errorf("line %d%s", n, err.Error()[len(m[0]):])
}

// DecodeResource reads one resource's JSON strictly (unknown keys are
// refused, with their line and column).
func DecodeResource(data []byte) (*Resource, error) {
	var r Resource
	if err := decodeStrict(data, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

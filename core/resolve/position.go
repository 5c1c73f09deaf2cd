package resolve

import (
	"strings"

	"github.com/gcompose/gcompose/core/source"
)

// refPos is where the "${" at byte offset off of the string s (standing at
// JSON pointer ptr) was written. When the loader recorded the string's own
// position and the string is on one line, the column is moved onto the
// "${": by finding the same "${" in the file's line (right for quoted
// scalars and escapes), or else by adding the offset.
func (rv *resolver) refPos(ptr, s string, off int) source.Pos {
	p, exact := rv.app.Positions[ptr]
	if !exact {
		return rv.app.Pos(ptr)
	}
	if strings.ContainsAny(s, "\r\n") || off < 0 || off > len(s) {
		return p
	}
	nth := strings.Count(s[:off], "${") // occurrences of "${" before ours ($${ included)
	if line, ok := rv.lines.line(p.File, p.Line); ok && p.Col >= 1 && p.Col <= len(line)+1 {
		rest := line[p.Col-1:]
		at := 0
		for i := 0; ; i++ {
			j := strings.Index(rest[at:], "${")
			if j < 0 {
				break
			}
			if i == nth {
				p.Col += at + j
				return p
			}
			at += j + 2
		}
	}
	p.Col += off
	return p
}

// lineCache reads descriptor files once, on demand, to place columns.
type lineCache struct {
	read  func(string) ([]byte, error)
	files map[string][]string
}

func newLineCache(read func(string) ([]byte, error)) *lineCache {
	return &lineCache{read: read, files: map[string][]string{}}
}

// line returns the 1-based line n of file, if the file can be read.
func (c *lineCache) line(file string, n int) (string, bool) {
	lines, ok := c.files[file]
	if !ok {
		if data, err := c.read(file); err == nil {
			lines = strings.Split(string(data), "\n")
		}
		c.files[file] = lines // nil when unreadable: not tried again
	}
	if n < 1 || n > len(lines) {
		return "", false
	}
	return lines[n-1], true
}

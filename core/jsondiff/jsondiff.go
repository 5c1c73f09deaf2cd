// Package jsondiff compares two JSON values (decoded as map[string]any,
// []any and scalars) and lists the differences as JSON pointers. The plan
// output and gcompose diff both use it.
package jsondiff

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gcompose/gcompose/internal/jsonout"
	"github.com/gcompose/gcompose/internal/jsonpointer"
	"github.com/gcompose/gcompose/internal/jsonvalue"
)

// Op of a change.
type Op string

const (
	Added   Op = "added"
	Removed Op = "removed"
	Changed Op = "changed"
)

// Change is one field that differs: Path is a JSON pointer into the
// resource (e.g. /config/content).
type Change struct {
	Op   Op     `json:"op"`
	Path string `json:"path"`
	From any    `json:"from,omitempty"`
	To   any    `json:"to,omitempty"`
}

// Values compares two JSON values (maps, arrays, scalars) below path and
// returns the differences, sorted by path. Maps are compared key by key;
// arrays element by element (a length change adds or removes the tail).
func Values(path string, a, b any) []Change {
	var out []Change
	walk(path, a, b, &out)
	return out
}

func walk(path string, a, b any, out *[]Change) {
	switch {
	case a == nil && b == nil:
		return
	case a == nil:
		*out = append(*out, Change{Op: Added, Path: path, To: b})
		return
	case b == nil:
		*out = append(*out, Change{Op: Removed, Path: path, From: a})
		return
	}
	ma, okA := a.(map[string]any)
	mb, okB := b.(map[string]any)
	if okA && okB {
		keys := map[string]bool{}
		for k := range ma {
			keys[k] = true
		}
		for k := range mb {
			keys[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			walk(path+"/"+jsonpointer.Escape(k), ma[k], mb[k], out)
		}
		return
	}
	la, okA := a.([]any)
	lb, okB := b.([]any)
	if okA && okB {
		for i := 0; i < len(la) || i < len(lb); i++ {
			var x, y any
			if i < len(la) {
				x = la[i]
			}
			if i < len(lb) {
				y = lb[i]
			}
			if i >= len(la) {
				*out = append(*out, Change{Op: Added, Path: path + "/" + strconv.Itoa(i), To: y})
			} else if i >= len(lb) {
				*out = append(*out, Change{Op: Removed, Path: path + "/" + strconv.Itoa(i), From: x})
			} else {
				walk(path+"/"+strconv.Itoa(i), x, y, out)
			}
		}
		return
	}
	if !jsonvalue.Equal(a, b) {
		*out = append(*out, Change{Op: Changed, Path: path, From: a, To: b})
	}
}

// Text is v as compact JSON for people: nothing HTML-escaped (">" and "&"
// stay as typed, not \u003e and \u0026) and never cut.
func Text(v any) string {
	var b strings.Builder
	if err := jsonout.Line(&b, v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Wrap breaks line into lines of at most width runes, each continuation
// indented by indent spaces, preferring to break after a space or a comma.
// A width <= 0, or too small to hold the indent and some text, never wraps:
// the line stays whole for logs and grep.
func Wrap(line string, indent, width int) string {
	room := width - indent
	if width <= 0 || room < 20 {
		return line
	}
	r := []rune(line)
	if len(r) <= width {
		return line
	}
	var b strings.Builder
	pad := strings.Repeat(" ", indent)
	max := width
	for len(r) > max {
		cut := max
		// Break at the last space or comma in the last third of the chunk,
		// so words and JSON elements stay whole when they can.
		for i := max - 1; i > max*2/3; i-- {
			if r[i] == ' ' || r[i] == ',' {
				cut = i + 1
				break
			}
		}
		// A space at the end of a line is kept: joining the lines gives
		// the value back exactly.
		b.WriteString(string(r[:cut]))
		b.WriteString("\n")
		b.WriteString(pad)
		r = r[cut:]
		max = room
	}
	b.WriteString(string(r))
	return b.String()
}

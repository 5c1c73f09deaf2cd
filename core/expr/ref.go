package expr

import (
	"fmt"
	"strconv"
	"strings"
)

// Ref is one ${...} reference.
type Ref struct {
	// Path is the parsed path: names and list indexes, in order.
	Path []Step
	// Offset is the byte offset of "${" in the string it was parsed from.
	Offset int
	// Raw is the text between "${" and "}" as written.
	Raw string
}

// Step is one path element: a name (services, db-service, ip) or a list
// index ([0]).
type Step struct {
	Name    string
	Index   int
	IsIndex bool
}

func (s Step) String() string {
	if s.IsIndex {
		return "[" + strconv.Itoa(s.Index) + "]"
	}
	return s.Name
}

// String returns the path in canonical form: names joined by dots, indexes
// in brackets (services.web[1].network_node.ip).
func (r Ref) String() string { return PathString(r.Path) }

// Text returns the reference as it would be written: ${path}.
func (r Ref) Text() string { return "${" + r.String() + "}" }

// PathString renders steps in canonical form.
func PathString(steps []Step) string {
	var b strings.Builder
	for i, s := range steps {
		if !s.IsIndex && i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.String())
	}
	return b.String()
}

// parseRef parses the inside of ${...}; at is the offset of "${" in the
// enclosing string, used in errors.
func parseRef(inner string, at int) (*Ref, error) {
	lead := len(inner) - len(strings.TrimLeft(inner, " \t"))
	path := strings.TrimSpace(inner)
	if path == "" {
		return nil, &SyntaxError{Offset: at, Msg: `empty reference "${}"`}
	}
	base := at + 2 + lead // offset of the path's first byte
	ref := &Ref{Offset: at, Raw: inner}
	i := 0
	for i < len(path) {
		// a name
		start := i
		for i < len(path) && isNameByte(path[i]) {
			i++
		}
		if i == start {
			return nil, &SyntaxError{Offset: base + i, Msg: fmt.Sprintf("reference %q: expected a name at %q", path, path[i:])}
		}
		ref.Path = append(ref.Path, Step{Name: path[start:i]})
		// zero or more [N]
		for i < len(path) && path[i] == '[' {
			end := strings.IndexByte(path[i:], ']')
			if end < 0 {
				return nil, &SyntaxError{Offset: base + i, Msg: fmt.Sprintf("reference %q: unterminated \"[\"", path)}
			}
			num := path[i+1 : i+end]
			n, err := strconv.Atoi(num)
			if err != nil || n < 0 || num == "" || (len(num) > 1 && num[0] == '0') || num[0] == '+' {
				return nil, &SyntaxError{Offset: base + i, Msg: fmt.Sprintf("reference %q: index %q is not a non-negative integer", path, num)}
			}
			ref.Path = append(ref.Path, Step{Index: n, IsIndex: true})
			i += end + 1
		}
		if i == len(path) {
			break
		}
		if path[i] != '.' {
			return nil, &SyntaxError{Offset: base + i, Msg: fmt.Sprintf("reference %q: unexpected %q", path, path[i])}
		}
		i++
		if i == len(path) {
			return nil, &SyntaxError{Offset: base + i, Msg: fmt.Sprintf("reference %q ends with \".\"", path)}
		}
	}
	return ref, nil
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

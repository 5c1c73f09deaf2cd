// Package expr parses and evaluates the ${...} templates that may appear in any
// string value of a descriptor: literal text, references such as
// ${services.db-service.network_node.ip} or ${services.web[1].network_node.ip},
// and the escape $${ for a literal "${".
package expr

import (
	"fmt"
	"strings"
)

// Template is a parsed string value: a sequence of literal parts and
// references.
type Template struct {
	src   string
	parts []part
}

// part is either a literal (ref == nil) or a reference.
type part struct {
	lit string
	ref *Ref
}

// Parse splits s into literal text and references. An unterminated "${" or an
// empty or malformed path is an error that names the byte offset in s.
func Parse(s string) (*Template, error) {
	t := &Template{src: s}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, part{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			lit.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return nil, &SyntaxError{Offset: i, Msg: `unterminated "${": missing "}"`}
			}
			inner := s[i+2 : i+2+end]
			ref, err := parseRef(inner, i)
			if err != nil {
				return nil, err
			}
			flush()
			t.parts = append(t.parts, part{ref: ref})
			i += 2 + end + 1
		default:
			lit.WriteByte(s[i])
			i++
		}
	}
	flush()
	return t, nil
}

// SyntaxError is a malformed template; Offset is the byte offset in the
// string where the problem starts.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("offset %d: %s", e.Offset, e.Msg) }

// IsLiteral reports whether the template holds no reference.
func (t *Template) IsLiteral() bool {
	for _, p := range t.parts {
		if p.ref != nil {
			return false
		}
	}
	return true
}

// Refs returns the references in order of appearance (repeats included).
func (t *Template) Refs() []Ref {
	var out []Ref
	for _, p := range t.parts {
		if p.ref != nil {
			out = append(out, *p.ref)
		}
	}
	return out
}

// Literal returns the unescaped text of a literal template ("$${" becomes
// "${"); for a template with references it returns the source unchanged.
func (t *Template) Literal() string {
	if !t.IsLiteral() {
		return t.src
	}
	var b strings.Builder
	for _, p := range t.parts {
		b.WriteString(p.lit)
	}
	return b.String()
}

// IsSingleRef reports whether the template is exactly one reference and
// nothing else, in which case it evaluates to the referenced value's own type.
func (t *Template) IsSingleRef() bool { return len(t.parts) == 1 && t.parts[0].ref != nil }

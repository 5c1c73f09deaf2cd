package constraint

import (
	"fmt"
	"strings"
)

// Limits on what Parse accepts, as yagna's parser has: they keep hostile input
// (a remote Offer's constraints) from exhausting the stack or memory.
const (
	MaxInputBytes = 64 * 1024
	MaxDepth      = 128
)

// ParseError is a syntax error at a byte offset of the input.
type ParseError struct {
	Offset int    // byte offset into the input
	Msg    string // what was wrong there
	Input  string // the whole input (possibly long)
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("constraint: %s at offset %d", e.Msg, e.Offset)
}

// Parse parses a filter. The error is a *ParseError naming the offset.
func Parse(s string) (Expr, error) {
	if len(s) > MaxInputBytes {
		return nil, &ParseError{Offset: MaxInputBytes, Msg: fmt.Sprintf("input longer than %d bytes", MaxInputBytes), Input: s}
	}
	p := &parser{in: s}
	p.skipWS()
	if p.pos == len(s) {
		return nil, p.errf("empty input")
	}
	e, err := p.filter(0)
	if err != nil {
		return nil, err
	}
	p.skipWS()
	if p.pos != len(s) {
		return nil, p.errf("unexpected trailing input %q", clip(s[p.pos:]))
	}
	return e, nil
}

type parser struct {
	in  string
	pos int
}

func (p *parser) errf(format string, args ...any) *ParseError {
	return &ParseError{Offset: p.pos, Msg: fmt.Sprintf(format, args...), Input: p.in}
}

func (p *parser) peek() (byte, bool) {
	if p.pos < len(p.in) {
		return p.in[p.pos], true
	}
	return 0, false
}

func isWS(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func (p *parser) skipWS() {
	for p.pos < len(p.in) && isWS(p.in[p.pos]) {
		p.pos++
	}
}

func (p *parser) filter(depth int) (Expr, error) {
	if depth >= MaxDepth {
		return nil, p.errf("nesting deeper than %d", MaxDepth)
	}
	c, ok := p.peek()
	if !ok {
		return nil, p.errf("unexpected end of input, expected '('")
	}
	if c != '(' {
		return nil, p.errf("expected '(' but found %q", c)
	}
	open := p.pos
	p.pos++
	p.skipWS()
	c, ok = p.peek()
	if !ok {
		return nil, p.errf("unexpected end of input after '(' opened at offset %d", open)
	}
	switch c {
	case ')':
		p.pos++
		return Empty{}, nil
	case '&', '|':
		p.pos++
		var exprs []Expr
		for {
			p.skipWS()
			c, ok := p.peek()
			if !ok {
				return nil, p.errf("unexpected end of input, group opened at offset %d is not closed", open)
			}
			if c == ')' {
				p.pos++
				break
			}
			x, err := p.filter(depth + 1)
			if err != nil {
				return nil, err
			}
			exprs = append(exprs, x)
		}
		if exprs == nil {
			exprs = []Expr{}
		}
		if c == '&' {
			return And{Exprs: exprs}, nil
		}
		return Or{Exprs: exprs}, nil
	case '!':
		p.pos++
		p.skipWS()
		x, err := p.filter(depth + 1)
		if err != nil {
			return nil, err
		}
		p.skipWS()
		c, ok := p.peek()
		if !ok {
			return nil, p.errf("unexpected end of input, '(!' opened at offset %d is not closed", open)
		}
		if c != ')' {
			return nil, p.errf("expected ')' closing '(!' opened at offset %d, found %q", open, c)
		}
		p.pos++
		return Not{Expr: x}, nil
	}
	return p.predicate(open)
}

func (p *parser) predicate(open int) (Expr, error) {
	keyStart := p.pos
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == '=' || c == '<' || c == '>' || c == '~' || c == ')' || c == '(' {
			break
		}
		p.pos++
	}
	key := strings.TrimSpace(p.in[keyStart:p.pos])
	if key == "" {
		p.pos = keyStart
		return nil, p.errf("empty property name")
	}
	if i := strings.IndexFunc(key, func(r rune) bool { return r < 0x80 && isWS(byte(r)) }); i >= 0 {
		p.pos = keyStart + strings.Index(p.in[keyStart:], key) + i
		return nil, p.errf("whitespace inside property name %q", key)
	}
	if strings.ContainsAny(key[:1], "&|!") {
		p.pos = keyStart
		return nil, p.errf("property name %q starts with an operator", key)
	}
	opPos := p.pos
	c, ok := p.peek()
	if !ok {
		return nil, p.errf("unexpected end of input after property %q, expected an operator", key)
	}
	var op Op
	rest := p.in[p.pos:]
	switch {
	case strings.HasPrefix(rest, "<="):
		op, p.pos = Le, p.pos+2
	case strings.HasPrefix(rest, ">="):
		op, p.pos = Ge, p.pos+2
	case strings.HasPrefix(rest, "<>"):
		op, p.pos = Ne, p.pos+2
	case c == '=':
		op, p.pos = Eq, p.pos+1
	case c == '<':
		op, p.pos = Lt, p.pos+1
	case c == '>':
		op, p.pos = Gt, p.pos+1
	case c == '~':
		return nil, p.errf("unsupported operator '~' (approximate match)")
	default:
		return nil, p.errf("expected an operator (=, <=, >=, <>, <, >) after property %q, found %q", key, c)
	}
	valStart := p.pos
	for p.pos < len(p.in) && p.in[p.pos] != ')' {
		if p.in[p.pos] == '(' {
			return nil, p.errf("unexpected '(' in value of %q", key)
		}
		p.pos++
	}
	if p.pos == len(p.in) {
		return nil, p.errf("unexpected end of input, predicate opened at offset %d is not closed", open)
	}
	val := strings.TrimSpace(p.in[valStart:p.pos])
	p.pos++ // ')'
	if val == "" {
		return nil, &ParseError{Offset: opPos, Msg: fmt.Sprintf("missing value after %q%s", key, op), Input: p.in}
	}
	if op == Eq && val == "*" {
		return Present{Key: key}, nil
	}
	return Compare{Key: key, Op: op, Value: val}, nil
}

func clip(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

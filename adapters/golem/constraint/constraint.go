// Package constraint implements yagna's market constraint language: LDAP-like
// filters such as
//
//	(&(golem.inf.mem.gib>=4)(golem.runtime.capabilities=vpn)(!(golem.node.debug.subnet=private*)))
//
// It parses a filter into an [Expr], prints it canonically, evaluates it against
// a Demand's or Offer's flat properties the way yagna's market resolver does, and
// matches a Demand against an Offer both ways ([Matches]). [FromGAP16] turns a
// GAP-16 payload's constraint strings and capabilities into a filter.
//
// # Grammar
//
//	filter   = "(" ws [ group | predicate ] ws ")"      ; "()" is true
//	group    = ("&" | "|") ws { filter ws } | "!" ws filter
//	predicate = key op value                             ; value runs up to ")"
//	op       = "=" | "<=" | ">=" | "<>" | "<" | ">"
//
// (key=*) means the property is present. Whitespace is allowed around groups and
// around keys and values (keys and values are trimmed). "~" (approximate match) is
// rejected, as yagna does.
//
// # Evaluation
//
// The property's own type decides how a predicate compares (as in yagna):
//   - string: "=" and "<>" compare with "*" in the constraint value as a wildcard
//     for any run of characters (prefix*, *suffix, a*b); "<", "<=", ">", ">=" compare
//     lexically (byte order).
//   - number (any Go numeric type or json.Number): the constraint value is parsed as
//     a float; a value that is not a number makes the predicate false.
//   - bool: "=" and "<>" against "true"/"false"; ordering is false.
//   - list: "=" is membership (any element equals the value) or, when the value is
//     a list literal "[a,b]", set equality; "<>" is its negation; ordering is false.
//   - key suffix "@v": both sides are semantic versions (golem.runtime.version@v);
//     "@t": RFC 3339 timestamps; "@d": decimals. The property is looked up under the
//     full key and under the key without the suffix.
//
// A predicate on a property that is absent (or of a type that cannot be compared)
// is Undefined, and Undefined propagates through "&", "|" and "!" as in yagna's
// three-valued resolver: (!(x=1)) is Undefined, not true, when x is absent. A
// filter matches only when it evaluates to True.
//
// Properties are flat dotted keys ("golem.inf.cpu.cores"); nested JSON objects
// ({"golem": {"inf": ...}}) are also found by walking the dotted path.
package constraint

import (
	"fmt"
	"strings"
)

// Op is a comparison operator of a predicate.
type Op int

// The comparison operators.
const (
	Eq Op = iota // =
	Ne           // <>
	Lt           // <
	Le           // <=
	Gt           // >
	Ge           // >=
)

// String returns the operator's spelling in the language.
func (o Op) String() string {
	switch o {
	case Eq:
		return "="
	case Ne:
		return "<>"
	case Lt:
		return "<"
	case Le:
		return "<="
	case Gt:
		return ">"
	case Ge:
		return ">="
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Result is the three-valued outcome of evaluating a filter.
type Result int

// The results of Eval.
const (
	False Result = iota
	True
	Undefined
)

// String returns "true", "false" or "undefined".
func (r Result) String() string {
	switch r {
	case True:
		return "true"
	case False:
		return "false"
	}
	return "undefined"
}

// Expr is a parsed filter.
type Expr interface {
	// String is the canonical form: no whitespace, groups spelled "(&...)".
	String() string
	// Eval evaluates the filter against flat properties.
	Eval(props map[string]any) Result
	// Match reports whether Eval is True.
	Match(props map[string]any) bool
	writeTo(b *strings.Builder)
}

// Empty is the filter "()": always true.
type Empty struct{}

// And is "(&c1 c2 ...)": true when every operand is (true with no operands).
type And struct{ Exprs []Expr }

// Or is "(|c1 c2 ...)": true when some operand is (false with no operands).
type Or struct{ Exprs []Expr }

// Not is "(!c)".
type Not struct{ Expr Expr }

// Present is "(key=*)": the property exists.
type Present struct{ Key string }

// Compare is "(key OP value)".
type Compare struct {
	Key   string
	Op    Op
	Value string
}

func (Empty) writeTo(b *strings.Builder) { b.WriteString("()") }

func (e And) writeTo(b *strings.Builder) { writeGroup(b, '&', e.Exprs) }

func (e Or) writeTo(b *strings.Builder) { writeGroup(b, '|', e.Exprs) }

func (e Not) writeTo(b *strings.Builder) {
	b.WriteString("(!")
	if e.Expr == nil {
		Empty{}.writeTo(b)
	} else {
		e.Expr.writeTo(b)
	}
	b.WriteByte(')')
}

func (e Present) writeTo(b *strings.Builder) {
	b.WriteByte('(')
	b.WriteString(e.Key)
	b.WriteString("=*)")
}

func (e Compare) writeTo(b *strings.Builder) {
	b.WriteByte('(')
	b.WriteString(e.Key)
	b.WriteString(e.Op.String())
	b.WriteString(e.Value)
	b.WriteByte(')')
}

func writeGroup(b *strings.Builder, op byte, exprs []Expr) {
	b.WriteByte('(')
	b.WriteByte(op)
	for _, x := range exprs {
		if x == nil {
			Empty{}.writeTo(b)
			continue
		}
		x.writeTo(b)
	}
	b.WriteByte(')')
}

func str(e Expr) string {
	var b strings.Builder
	e.writeTo(&b)
	return b.String()
}

func (e Empty) String() string   { return str(e) }
func (e And) String() string     { return str(e) }
func (e Or) String() string      { return str(e) }
func (e Not) String() string     { return str(e) }
func (e Present) String() string { return str(e) }
func (e Compare) String() string { return str(e) }

func (e Empty) Match(p map[string]any) bool   { return e.Eval(p) == True }
func (e And) Match(p map[string]any) bool     { return e.Eval(p) == True }
func (e Or) Match(p map[string]any) bool      { return e.Eval(p) == True }
func (e Not) Match(p map[string]any) bool     { return e.Eval(p) == True }
func (e Present) Match(p map[string]any) bool { return e.Eval(p) == True }
func (e Compare) Match(p map[string]any) bool { return e.Eval(p) == True }

// Eval of "()" is True.
func (Empty) Eval(map[string]any) Result { return True }

// Eval is False if an operand is False, else Undefined if one is Undefined, else True.
func (e And) Eval(p map[string]any) Result {
	res := True
	for _, x := range e.Exprs {
		if x == nil {
			continue
		}
		switch x.Eval(p) {
		case False:
			return False
		case Undefined:
			res = Undefined
		}
	}
	return res
}

// Eval is True if an operand is True, else Undefined if one is Undefined, else False.
func (e Or) Eval(p map[string]any) Result {
	res := False
	for _, x := range e.Exprs {
		if x == nil {
			return True
		}
		switch x.Eval(p) {
		case True:
			return True
		case Undefined:
			res = Undefined
		}
	}
	return res
}

// Eval negates True and False; Undefined stays Undefined.
func (e Not) Eval(p map[string]any) Result {
	if e.Expr == nil {
		return False
	}
	switch e.Expr.Eval(p) {
	case True:
		return False
	case False:
		return True
	}
	return Undefined
}

// Eval is True when the property exists (with any value, even null).
func (e Present) Eval(p map[string]any) Result {
	if _, ok := lookup(p, e.Key); ok {
		return True
	}
	if base, _, ok := typedKey(e.Key); ok {
		if _, ok := lookup(p, base); ok {
			return True
		}
	}
	return False
}

// Eval compares the property with the value; see the package documentation.
func (e Compare) Eval(p map[string]any) Result {
	base, kind, typed := typedKey(e.Key)
	v, ok := lookup(p, e.Key)
	if !ok && typed {
		v, ok = lookup(p, base)
	}
	if !ok || v == nil {
		return Undefined
	}
	if typed {
		return compareTyped(kind, v, e.Op, e.Value)
	}
	return compareValue(v, e.Op, e.Value)
}

// Matches reports whether a Demand and an Offer match both ways: the Demand's
// constraints hold on the Offer's properties and the Offer's constraints hold on
// the Demand's properties. An empty constraint string (only whitespace) counts as
// "()". A constraint that does not parse is an error.
func Matches(demandProps map[string]any, demandCons string, offerProps map[string]any, offerCons string) (bool, error) {
	d, err := ParseOrEmpty(demandCons)
	if err != nil {
		return false, fmt.Errorf("demand constraints: %w", err)
	}
	o, err := ParseOrEmpty(offerCons)
	if err != nil {
		return false, fmt.Errorf("offer constraints: %w", err)
	}
	return d.Eval(offerProps) == True && o.Eval(demandProps) == True, nil
}

// ParseOrEmpty is Parse, with an empty constraint string (only whitespace)
// as "()", which every set of properties satisfies.
func ParseOrEmpty(s string) (Expr, error) {
	if strings.TrimSpace(s) == "" {
		return Empty{}, nil
	}
	return Parse(s)
}

// AndOf joins filters with "&", dropping "()" operands and flattening nested
// "&" groups; zero operands give "()", one gives itself.
func AndOf(exprs ...Expr) Expr {
	var out []Expr
	for _, x := range exprs {
		switch x := x.(type) {
		case nil, Empty:
		case And:
			out = append(out, AndOf(x.Exprs...))
		default:
			out = append(out, x)
		}
	}
	// flatten And results of the recursive call
	var flat []Expr
	for _, x := range out {
		switch x := x.(type) {
		case Empty:
		case And:
			flat = append(flat, x.Exprs...)
		default:
			flat = append(flat, x)
		}
	}
	switch len(flat) {
	case 0:
		return Empty{}
	case 1:
		return flat[0]
	}
	return And{Exprs: flat}
}

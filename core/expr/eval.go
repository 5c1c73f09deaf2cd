package expr

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gcompose/gcompose/internal/jsonout"
)

// Lookup finds the value of a reference. known is false when the value is
// not known yet (a runtime output before apply); err reports a reference that
// can never be satisfied.
type Lookup func(r Ref) (value any, known bool, err error)

// UnknownError is returned by Eval when some references had no value yet.
type UnknownError struct{ Refs []Ref }

func (e *UnknownError) Error() string {
	names := make([]string, len(e.Refs))
	for i, r := range e.Refs {
		names[i] = r.Text()
	}
	return "value not known yet: " + strings.Join(names, ", ")
}

// Eval evaluates the template. A template that is exactly one reference
// evaluates to the referenced value itself (a list or a number passes
// through); otherwise every value is stringified into the text. A reference
// whose value is not known yet makes Eval fail with *UnknownError.
func (t *Template) Eval(lookup Lookup) (any, error) {
	v, unknown, err := t.Partial(lookup, nil)
	if err != nil {
		return nil, err
	}
	if len(unknown) > 0 {
		return nil, &UnknownError{Refs: unknown}
	}
	return v, nil
}

// Partial evaluates what can be evaluated. When every reference is known it
// returns the value as Eval does. Otherwise it returns a string that is again
// a template: known references substituted, literal "${" escaped as "$${",
// and each unknown reference written as keep(ref) (ref.Text() when keep is
// nil), together with the unknown references.
func (t *Template) Partial(lookup Lookup, keep func(Ref) string) (any, []Ref, error) {
	if t.IsLiteral() {
		return t.Literal(), nil, nil
	}
	vals := make([]any, len(t.parts))
	var unknown []Ref
	for i, p := range t.parts {
		if p.ref == nil {
			continue
		}
		v, ok, err := lookup(*p.ref)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", p.ref.Text(), err)
		}
		if !ok {
			unknown = append(unknown, *p.ref)
			continue
		}
		vals[i] = v
	}
	if len(unknown) == 0 && t.IsSingleRef() {
		return vals[0], nil, nil
	}
	var b strings.Builder
	escape := len(unknown) > 0
	write := func(s string) {
		if escape {
			s = strings.ReplaceAll(s, "${", "$${")
		}
		b.WriteString(s)
	}
	for i, p := range t.parts {
		switch {
		case p.ref == nil:
			write(p.lit)
		case vals[i] == nil && isUnknown(unknown, p.ref):
			if keep != nil {
				b.WriteString(keep(*p.ref))
			} else {
				b.WriteString(p.ref.Text())
			}
		default:
			s, err := Stringify(vals[i])
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", p.ref.Text(), err)
			}
			write(s)
		}
	}
	return b.String(), unknown, nil
}

func isUnknown(unknown []Ref, r *Ref) bool {
	for i := range unknown {
		if unknown[i].Offset == r.Offset {
			return true
		}
	}
	return false
}

// Stringify renders a value for interpolation into text: strings as they
// are, numbers and booleans in their shortest form, null as "", lists and
// maps as compact JSON, not HTML-escaped: the text is a value an adapter
// receives (a shell command keeps its ">" and "&&"), not a web page.
func Stringify(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case fmt.Stringer:
		return x.String(), nil
	default:
		var b strings.Builder
		if err := jsonout.Line(&b, x); err != nil {
			return "", fmt.Errorf("cannot render %T as text: %w", v, err)
		}
		return strings.TrimSuffix(b.String(), "\n"), nil
	}
}

package expr

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// WalkStrings returns a copy of the generic tree v (map[string]any, []any,
// scalars) in which every string s found at JSON pointer p is replaced by
// fn(p, s). Map keys are not touched. Every error is collected; the returned
// tree is complete even when some strings failed (they keep their value).
func WalkStrings(v any, fn func(pointer, s string) (any, error)) (any, error) {
	var errs []error
	out := walk(v, "", fn, &errs)
	return out, errors.Join(errs...)
}

func walk(v any, ptr string, fn func(pointer, s string) (any, error), errs *[]error) any {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // errors in a stable order
		m := make(map[string]any, len(x))
		for _, k := range keys {
			m[k] = walk(x[k], ptr+"/"+EscapePointer(k), fn, errs)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = walk(e, ptr+"/"+strconv.Itoa(i), fn, errs)
		}
		return l
	case []string:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = walk(e, ptr+"/"+strconv.Itoa(i), fn, errs)
		}
		return l
	case string:
		r, err := fn(ptr, x)
		if err != nil {
			*errs = append(*errs, err)
			return x
		}
		return r
	default:
		return v
	}
}

// EscapePointer escapes one JSON pointer token (RFC 6901).
func EscapePointer(tok string) string {
	if !strings.ContainsAny(tok, "~/") {
		return tok
	}
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// Unknown is a reference whose value was not known, and where it stands.
type Unknown struct {
	Pointer string
	Ref     Ref
}

// EvalTree evaluates every string template in the tree v (used at apply time,
// when runtime values become known) and returns the new tree. Strings whose
// references are all known become their values (a lone reference keeps the
// value's type); strings with references still unknown stay templates (see
// Template.Partial) and are listed in the returned unknowns. Errors name the
// JSON pointer of the string.
func EvalTree(v any, lookup Lookup) (any, []Unknown, error) {
	var unknown []Unknown
	out, err := WalkStrings(v, func(ptr, s string) (any, error) {
		if !strings.Contains(s, "${") {
			return s, nil
		}
		t, err := Parse(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pointerOrRoot(ptr), err)
		}
		val, unk, err := t.Partial(lookup, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pointerOrRoot(ptr), err)
		}
		for _, r := range unk {
			unknown = append(unknown, Unknown{Pointer: ptr, Ref: r})
		}
		return val, nil
	})
	return out, unknown, err
}

func pointerOrRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

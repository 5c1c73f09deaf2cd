package expr

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gcompose/gcompose/internal/jsonpointer"
)

// WalkTemplates returns a copy of the generic tree v (map[string]any, []any,
// scalars) in which every string s that holds "${" (a template, or a "$${"
// escape), found at JSON pointer p, is replaced by fn(p, s); other values
// are copied as they are. Map keys are not touched. Strings are visited in
// a stable order (map keys sorted). Every error is collected; the returned
// tree is complete even when some strings failed (they keep their value).
func WalkTemplates(v any, fn func(pointer, s string) (any, error)) (any, error) {
	w := walker{fn: fn}
	out := w.walk(v)
	return out, errors.Join(w.errs...)
}

type walker struct {
	fn   func(pointer, s string) (any, error)
	ptr  []byte // pointer of the value being walked, reused
	errs []error
}

func (w *walker) walk(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		var buf [8]string
		keys := buf[:0]
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		n := len(w.ptr)
		for _, k := range keys {
			w.ptr = append(append(w.ptr[:n], '/'), jsonpointer.Escape(k)...)
			m[k] = w.walk(x[k])
		}
		w.ptr = w.ptr[:n]
		return m
	case []any:
		l := make([]any, len(x))
		n := len(w.ptr)
		for i, e := range x {
			w.ptr = strconv.AppendInt(append(w.ptr[:n], '/'), int64(i), 10)
			l[i] = w.walk(e)
		}
		w.ptr = w.ptr[:n]
		return l
	case []string:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = e
		}
		return w.walk(l)
	case string:
		if !strings.Contains(x, "${") {
			return x
		}
		r, err := w.fn(string(w.ptr), x)
		if err != nil {
			w.errs = append(w.errs, err)
			return x
		}
		return r
	default:
		return v
	}
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
	out, err := WalkTemplates(v, func(ptr, s string) (any, error) {
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

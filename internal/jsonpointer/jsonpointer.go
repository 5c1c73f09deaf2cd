// Package jsonpointer escapes, joins and follows JSON Pointers (RFC 6901),
// the paths gcompose uses for positions in a descriptor, in a config and in
// schema validation errors: the one implementation of the ~0/~1 rules.
package jsonpointer

import (
	"strconv"
	"strings"
)

// Escape escapes one reference token: "~" as "~0", then "/" as "~1".
func Escape(tok string) string {
	if !strings.ContainsAny(tok, "~/") {
		return tok
	}
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// Unescape undoes Escape: "~1" as "/", then "~0" as "~" (in that order, so
// that "~01" is "~1", not "/").
func Unescape(tok string) string {
	if !strings.Contains(tok, "~") {
		return tok
	}
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
}

// Format joins tokens into a pointer: "" for none, else "/" before each.
func Format(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(Escape(t))
	}
	return b.String()
}

// Split returns the unescaped tokens of ptr; "" (the whole document) has
// none. A pointer that does not start with "/" is not one: ok is false.
func Split(ptr string) (tokens []string, ok bool) {
	if ptr == "" {
		return nil, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	tokens = strings.Split(ptr[1:], "/")
	for i, t := range tokens {
		tokens[i] = Unescape(t)
	}
	return tokens, true
}

// Lookup finds the value ptr names in a decoded JSON value (maps and
// slices as encoding/json makes them); false when ptr is malformed or names
// nothing there.
func Lookup(v any, ptr string) (any, bool) {
	tokens, ok := Split(ptr)
	if !ok {
		return nil, false
	}
	for _, tok := range tokens {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[tok]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) || (len(tok) > 1 && tok[0] == '0') {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

package descriptor

import (
	"strconv"
	"strings"

	"github.com/gcompose/gcompose/core/source"
	"github.com/gcompose/gcompose/internal/jsonpointer"
)

// kind is the shape of a value in a descriptor tree.
type kind uint8

const (
	kindNull kind = iota
	kindScalar
	kindMap
	kindSeq
)

func (k kind) String() string {
	switch k {
	case kindScalar:
		return "a scalar"
	case kindMap:
		return "a mapping"
	case kindSeq:
		return "a list"
	default:
		return "null"
	}
}

// mergeTag is a YAML tag that changes how a value merges into earlier files.
type mergeTag uint8

const (
	tagNone     mergeTag = iota
	tagOverride          // !override: replace the earlier value instead of merging
	tagReset             // !reset: remove the key
)

// value is one node of a descriptor tree, with the file position it came from
// (yaml.Node knows line and column, not the file). Aliases are expanded, so
// every value is owned by exactly one parent.
type value struct {
	kind   kind
	pos    source.Pos // where the value starts
	keyPos source.Pos // where its key is written, for a mapping entry's value
	scalar any        // string, int64, float64 or bool, for kindScalar
	keys   []string   // mapping keys in written order
	m      map[string]*value
	items  []*value
	tag    mergeTag
}

// at is the position to report a problem with the value at: the value itself
// for a scalar, the key that introduces it for a mapping or list (the first
// line of a block mapping is its first key, which would mislead).
func (v *value) at() source.Pos {
	if v.kind != kindScalar && v.kind != kindNull && v.keyPos.IsValid() {
		return v.keyPos
	}
	if v.pos.IsValid() || !v.keyPos.IsValid() {
		return v.pos
	}
	return v.keyPos
}

func (v *value) get(key string) *value {
	if v == nil || v.kind != kindMap {
		return nil
	}
	return v.m[key]
}

func (v *value) set(key string, child *value) {
	if _, ok := v.m[key]; !ok {
		v.keys = append(v.keys, key)
	}
	v.m[key] = child
}

// delAll removes keys from a mapping in one pass (deleting one by one would
// be quadratic in a mapping with many doomed keys).
func (v *value) delAll(doomed map[string]bool) {
	if len(doomed) == 0 {
		return
	}
	kept := v.keys[:0]
	for _, k := range v.keys {
		if doomed[k] {
			delete(v.m, k)
			continue
		}
		kept = append(kept, k)
	}
	v.keys = kept
}

// text renders a scalar the way a user wrote it, for messages.
func (v *value) text() string {
	switch s := v.scalar.(type) {
	case string:
		return strconv.Quote(s)
	case nil:
		return "null"
	default:
		return scalarString(s)
	}
}

func scalarString(s any) string {
	switch s := s.(type) {
	case string:
		return s
	case int64:
		return strconv.FormatInt(s, 10)
	case float64:
		return strconv.FormatFloat(s, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(s)
	default:
		return ""
	}
}

// plain converts the tree to the generic form JSON Schema validates
// (map[string]any, []any, string, int64, float64, bool, nil).
func (v *value) plain() any {
	if v == nil {
		return nil
	}
	switch v.kind {
	case kindScalar:
		return v.scalar
	case kindMap:
		m := make(map[string]any, len(v.keys))
		for _, k := range v.keys {
			m[k] = v.m[k].plain()
		}
		return m
	case kindSeq:
		l := make([]any, len(v.items))
		for i, it := range v.items {
			l[i] = it.plain()
		}
		return l
	default:
		return nil
	}
}

// count is the number of values in the tree.
func (v *value) count() int {
	n := 1
	for _, k := range v.keys {
		n += v.m[k].count()
	}
	for _, c := range v.items {
		n += c.count()
	}
	return n
}

// lookup follows JSON pointer tokens (unescaped) down the tree.
func (v *value) lookup(tokens []string) *value {
	for _, t := range tokens {
		switch {
		case v == nil:
			return nil
		case v.kind == kindMap:
			v = v.m[t]
		case v.kind == kindSeq:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(v.items) {
				return nil
			}
			v = v.items[i]
		default:
			return nil
		}
	}
	return v
}

// pointerEscape escapes one JSON pointer token (RFC 6901).
func pointerEscape(s string) string { return jsonpointer.Escape(s) }

// pointer builds a JSON pointer from unescaped tokens.
func pointer(tokens ...string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(pointerEscape(t))
	}
	return b.String()
}

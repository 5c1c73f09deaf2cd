package descriptor

import (
	"reflect"
	"strings"

	"github.com/gcompose/gcompose/core/source"
)

// merger merges descriptor trees. Ordered merging (several -f files) lets a
// later file win; unordered merging (the files of one package, which GAP-16
// leaves unordered) refuses any disagreement, so the result cannot depend on
// the order.
type merger struct {
	unordered bool
	diags     source.Diagnostics
}

// merge merges src over dst and returns the result; dst may be nil. It may
// reuse and modify both trees.
func (mg *merger) merge(dst, src *value, path []string) *value {
	if mg.unordered && src.tag != tagNone {
		mg.diags.Errorf(src.at(), "%s has no meaning inside a package: its files are not ordered", tagName(src.tag))
		src.tag = tagNone
	}
	if dst == nil || src.tag == tagOverride {
		return mg.clean(src)
	}
	switch {
	case dst.kind == kindMap && src.kind == kindMap:
		var reset map[string]bool
		for _, k := range src.keys {
			child := src.m[k]
			if child.tag == tagReset && !mg.unordered {
				if reset == nil {
					reset = map[string]bool{}
				}
				reset[k] = true
				continue
			}
			delete(reset, k)
			dst.set(k, mg.merge(dst.m[k], child, append(path, k)))
		}
		dst.delAll(reset)
		dst.pos, dst.keyPos = src.pos, src.keyPos
		return dst
	case dst.kind == kindSeq && src.kind == kindSeq:
		for _, it := range src.items {
			dst.items = append(dst.items, mg.clean(it))
		}
		dst.pos, dst.keyPos = src.pos, src.keyPos
		return dst
	case dst.kind == kindNull:
		return mg.clean(src)
	case src.kind == kindNull && dst.kind == kindScalar && !mg.unordered:
		return mg.clean(src)
	case dst.kind == kindScalar && src.kind == kindScalar:
		if mg.unordered && !reflect.DeepEqual(dst.scalar, src.scalar) {
			mg.diags.Errorf(src.at(), "%s is %s here but %s at %s; the files of a package are not ordered, so they must agree",
				dotted(path), src.text(), dst.text(), dst.at())
			return dst
		}
		if mg.unordered {
			return dst
		}
		return mg.clean(src)
	case src.kind == kindNull && mg.unordered:
		return dst
	}
	hint := "; use !override to replace it or !reset to remove it"
	if mg.unordered {
		hint = ""
	}
	mg.diags.Errorf(src.at(), "cannot merge %s into %s for %s: %s here, %s at %s%s",
		src.kind, dst.kind, dotted(path), src.kind, dst.kind, dst.at(), hint)
	return dst
}

// clean strips merge tags from a tree taking part in a merge for the first
// time, dropping !reset entries (there is nothing earlier to reset).
func (mg *merger) clean(v *value) *value {
	if mg.unordered && v.tag != tagNone {
		mg.diags.Errorf(v.at(), "%s has no meaning inside a package: its files are not ordered", tagName(v.tag))
	}
	v.tag = tagNone
	switch v.kind {
	case kindMap:
		var reset map[string]bool
		for _, k := range v.keys {
			child := v.m[k]
			if child.tag == tagReset && !mg.unordered {
				if reset == nil {
					reset = map[string]bool{}
				}
				reset[k] = true
				continue
			}
			v.m[k] = mg.clean(child)
		}
		v.delAll(reset)
	case kindSeq:
		for i, it := range v.items {
			v.items[i] = mg.clean(it)
		}
	}
	return v
}

func tagName(t mergeTag) string {
	if t == tagReset {
		return "!reset"
	}
	return "!override"
}

// dotted renders a tree path for messages: services.web.init.
func dotted(path []string) string {
	if len(path) == 0 {
		return "the top level"
	}
	return strings.Join(path, ".")
}

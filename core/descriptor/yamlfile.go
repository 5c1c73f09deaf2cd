package descriptor

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/gcompose/gcompose/core/source"
	"go.yaml.in/yaml/v3"
)

// errAbort stops converting a file after a problem that makes going on
// pointless or dangerous (an alias bomb); the diagnostic is already recorded.
var errAbort = errors.New("aborted")

// parseFile parses one descriptor file into a tree, refusing YAML hazards:
// oversized input, several documents, a top level that is not a mapping,
// duplicate keys, alias bombs, unknown tags and excessive nesting. name is how
// positions call the file.
func parseFile(name string, data []byte, lim Limits) (root *value, diags source.Diagnostics) {
	filePos := source.Pos{File: name}
	if int64(len(data)) > lim.MaxFileBytes {
		diags.Errorf(filePos, "file is %d bytes, more than the %d allowed for a descriptor", len(data), lim.MaxFileBytes)
		return nil, diags
	}
	// The YAML parser has had panics on hostile input; never let one escape.
	defer func() {
		if r := recover(); r != nil {
			root = nil
			diags.Errorf(filePos, "YAML parser failed: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			diags.Errorf(filePos, "no YAML document: the file is empty")
		} else {
			diags.Errorf(syntaxErrorPos(name, data, err), "invalid YAML: %s", yamlErrorText(err))
		}
		return nil, diags
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		at := &extra
		if len(extra.Content) > 0 {
			at = extra.Content[0]
		}
		diags.Errorf(source.Pos{File: name, Line: at.Line, Col: at.Column}, "a descriptor file holds one YAML document; a second one starts here")
		return nil, diags
	} else if !errors.Is(err, io.EOF) {
		diags.Errorf(yamlErrorPos(name, err), "invalid YAML: %s", yamlErrorText(err))
		return nil, diags
	}
	top := &doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		top = doc.Content[0]
	}
	c := converter{file: name, lim: lim}
	v, err := c.convert(top, 0)
	diags = append(diags, c.diags...)
	if err != nil {
		return nil, diags
	}
	if v.kind != kindMap {
		diags.Errorf(v.pos, "the top level of a descriptor must be a mapping (meta, payloads, services, ...), not %s", v.kind)
		return nil, diags
	}
	return v, diags
}

// yamlErrorPos finds the line a yaml.v3 error names ("yaml: line 3: ...").
func yamlErrorPos(name string, err error) source.Pos {
	msg := err.Error()
	if i := strings.Index(msg, "line "); i >= 0 {
		rest := msg[i+len("line "):]
		j := 0
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		if n, convErr := strconv.Atoi(rest[:j]); convErr == nil && n > 0 {
			return source.Pos{File: name, Line: n, Col: 1}
		}
	}
	return source.Pos{File: name}
}

// syntaxErrorPos improves on the line yaml.v3 gives for a syntax error,
// which is often where the enclosing mapping starts rather than where the
// problem is: it finds the shortest prefix of the file (in lines) that fails
// with the same message, by bisection (a few parses, only on error).
func syntaxErrorPos(name string, data []byte, err error) source.Pos {
	pos := yamlErrorPos(name, err)
	want := yamlErrorText(err)
	lines := bytes.SplitAfter(data, []byte("\n"))
	fails := func(n int) bool {
		var node yaml.Node
		e := yaml.Unmarshal(bytes.Join(lines[:n], nil), &node)
		return e != nil && yamlErrorText(e) == want
	}
	lo, hi := max(pos.Line, 1), len(lines)
	if lo > hi || !fails(hi) {
		return pos
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if hi > pos.Line {
		line := lines[hi-1]
		col := len(line) - len(bytes.TrimLeft(line, " \t")) + 1
		return source.Pos{File: name, Line: hi, Col: col}
	}
	return pos
}

// yamlErrorText drops the "yaml: line N: " prefix the position already says.
func yamlErrorText(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if strings.HasPrefix(msg, "line ") {
		if i := strings.Index(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
	}
	return msg
}

// converter turns yaml.Nodes into values, expanding aliases under a budget.
type converter struct {
	file       string
	lim        Limits
	aliasDepth int        // > 0 while expanding an alias
	aliasNodes int        // values created by alias expansion
	aliasAt    source.Pos // the outermost alias being expanded
	diags      source.Diagnostics
}

func (c *converter) pos(n *yaml.Node) source.Pos {
	return source.Pos{File: c.file, Line: n.Line, Col: n.Column}
}

func (c *converter) convert(n *yaml.Node, depth int) (*value, error) {
	if depth > c.lim.MaxDepth {
		c.diags.Errorf(c.pos(n), "values nested deeper than %d levels", c.lim.MaxDepth)
		return nil, errAbort
	}
	if c.aliasDepth > 0 {
		c.aliasNodes++
		if c.aliasNodes > c.lim.MaxAliasNodes {
			c.diags.Errorf(c.aliasAt, "aliases expand to more than %d values (an alias bomb?)", c.lim.MaxAliasNodes)
			return nil, errAbort
		}
	}
	v := &value{pos: c.pos(n)}
	switch n.Tag {
	case "!override":
		v.tag = tagOverride
	case "!reset":
		v.tag = tagReset
	}
	switch n.Kind {
	case yaml.DocumentNode:
		// Only an empty document reaches here.
		v.kind = kindNull
		return v, nil
	case yaml.AliasNode:
		if n.Alias == nil {
			c.diags.Errorf(v.pos, "alias to an unknown anchor")
			return nil, errAbort
		}
		if c.aliasDepth == 0 {
			c.aliasAt = v.pos
		}
		c.aliasDepth++
		target, err := c.convert(n.Alias, depth+1)
		c.aliasDepth--
		if err != nil {
			return nil, err
		}
		copied := *target
		copied.pos = v.pos
		if v.tag != tagNone {
			copied.tag = v.tag
		}
		return &copied, nil
	case yaml.ScalarNode:
		return v, c.scalar(n, v)
	case yaml.SequenceNode:
		if err := c.checkTag(n, "!!seq"); err != nil {
			return nil, err
		}
		v.kind = kindSeq
		v.items = make([]*value, 0, len(n.Content))
		for _, item := range n.Content {
			iv, err := c.convert(item, depth+1)
			if err != nil {
				return nil, err
			}
			v.items = append(v.items, iv)
		}
		return v, nil
	case yaml.MappingNode:
		if err := c.checkTag(n, "!!map"); err != nil {
			return nil, err
		}
		return v, c.mapping(n, v, depth)
	default:
		c.diags.Errorf(v.pos, "unsupported YAML node")
		return nil, errAbort
	}
}

// checkTag refuses explicit tags other than the node's own and ours.
func (c *converter) checkTag(n *yaml.Node, own string) error {
	switch n.Tag {
	case "", "!", own, "!override", "!reset":
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!str", "!!int", "!!float", "!!bool", "!!null", "!!timestamp", "!!binary":
			return nil
		}
	}
	c.diags.Errorf(c.pos(n), "unsupported YAML tag %s (gcompose knows !override and !reset)", n.Tag)
	return nil
}

func (c *converter) scalar(n *yaml.Node, v *value) error {
	if err := c.checkTag(n, ""); err != nil {
		return err
	}
	tag := n.ShortTag()
	if v.tag != tagNone {
		plain := *n
		plain.Tag = ""
		tag = plain.ShortTag()
	}
	v.kind = kindScalar
	switch tag {
	case "!!null":
		v.kind = kindNull
	case "!!bool":
		b, err := strconv.ParseBool(strings.ToLower(n.Value))
		if err != nil {
			v.scalar = n.Value
		} else {
			v.scalar = b
		}
	case "!!int":
		s := strings.ReplaceAll(n.Value, "_", "")
		if i, err := strconv.ParseInt(s, 0, 64); err == nil {
			v.scalar = i
		} else if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) {
			v.scalar = f
		} else {
			v.scalar = n.Value
		}
	case "!!float":
		f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
		switch {
		case err == nil && !math.IsInf(f, 0) && !math.IsNaN(f):
			v.scalar = f
		case strings.Contains(strings.ToLower(n.Value), "inf") || strings.Contains(strings.ToLower(n.Value), "nan"):
			c.diags.Errorf(v.pos, "%s is not a finite number; quote it if it is a string", n.Value)
			v.scalar = n.Value
		default:
			v.scalar = n.Value
		}
	default: // !!str, !!timestamp, !!binary: kept as written
		v.scalar = n.Value
	}
	return nil
}

func (c *converter) mapping(n *yaml.Node, v *value, depth int) error {
	v.kind = kindMap
	v.m = make(map[string]*value, len(n.Content)/2)
	v.keys = make([]string, 0, len(n.Content)/2)
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if kn.Kind == yaml.ScalarNode && kn.ShortTag() == "!!merge" {
			merges = append(merges, vn)
			continue
		}
		if kn.Kind != yaml.ScalarNode {
			c.diags.Errorf(c.pos(kn), "a mapping key must be a plain scalar, not %s", nodeKind(kn))
			continue
		}
		key := kn.Value
		kp := c.pos(kn)
		if first, dup := v.m[key]; dup {
			c.diags.Errorf(kp, "duplicate key %q (first defined at line %d)", key, first.keyPos.Line)
			continue
		}
		child, err := c.convert(vn, depth+1)
		if err != nil {
			return err
		}
		child.keyPos = kp
		v.keys = append(v.keys, key)
		v.m[key] = child
	}
	// YAML merge keys (<<: *base): keys written in the mapping win, then the
	// merged mappings in order.
	for _, mn := range merges {
		sources := []*yaml.Node{mn}
		if mn.Kind == yaml.SequenceNode {
			sources = mn.Content
		}
		for _, sn := range sources {
			sv, err := c.convert(sn, depth+1)
			if err != nil {
				return err
			}
			if sv.kind != kindMap {
				c.diags.Errorf(c.pos(sn), "a merge key (<<) takes a mapping or a list of mappings, not %s", sv.kind)
				continue
			}
			for _, k := range sv.keys {
				if _, ok := v.m[k]; !ok {
					v.keys = append(v.keys, k)
					v.m[k] = sv.m[k]
				}
			}
		}
	}
	return nil
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	default:
		return "a scalar"
	}
}

package resolve

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gcompose/gcompose/core/expr"
)

// Outputs returns what apply knows of a node: its runtime outputs keyed by
// field (a service: network_node {ip, node_id}, agreement {id, provider_id,
// provider_name}, activity {id}, state, proxy; a network: network_id,
// owner_id, state; a resource: state {...}), and whether it knows the node
// at all. ${app.id}, when it was not given to Resolve, is asked as
// Outputs("app")["id"].
type Outputs func(nodeID string) (map[string]any, bool)

// Bind returns a copy of the node's Spec with its runtime references
// evaluated from outputs (a lone reference keeps the output's type). Those
// whose value is not there yet are listed in unknown (their strings stay
// templates): the engine asks the dependency again, or fails naming them.
func (n *Node) Bind(outputs Outputs) (spec map[string]any, unknown []expr.Unknown, err error) {
	spec, _ = deepCopy(n.Spec).(map[string]any)
	lookup := func(r expr.Ref) (any, bool, error) { return lookupOutput(outputs, r) }
	for _, ptr := range n.Templates {
		parent, key, s, ok := stringAt(spec, ptr)
		if !ok {
			return nil, nil, fmt.Errorf("%s: spec%s holds no template (internal)", n.ID, ptr)
		}
		t, perr := expr.Parse(s)
		if perr != nil {
			return nil, nil, fmt.Errorf("%s: spec%s: %w", n.ID, ptr, perr)
		}
		v, unk, eerr := t.Partial(lookup, nil)
		if eerr != nil {
			return nil, nil, fmt.Errorf("%s: spec%s: %w", n.ID, ptr, eerr)
		}
		for _, r := range unk {
			unknown = append(unknown, expr.Unknown{Pointer: ptr, Ref: r})
		}
		parent(key, v)
	}
	return spec, unknown, nil
}

// SplitRuntimeRef splits a kept (canonical) reference into the node it reads
// and the path inside that node's outputs: services.web[1].network_node.ip
// gives services.web[1] and [network_node ip].
func SplitRuntimeRef(r expr.Ref) (nodeID string, field []expr.Step, ok bool) {
	p := r.Path
	if len(p) == 2 && p[0].Name == "app" && p[1].Name == "id" {
		return "app", p[1:], true
	}
	if len(p) < 3 || p[1].IsIndex {
		return "", nil, false
	}
	switch p[0].Name {
	case "services", "networks", "resources":
	default:
		return "", nil, false
	}
	id, rest := p[0].Name+"."+p[1].Name, p[2:]
	if rest[0].IsIndex {
		id += "[" + strconv.Itoa(rest[0].Index) + "]"
		rest = rest[1:]
	}
	if len(rest) == 0 {
		return "", nil, false
	}
	return id, rest, true
}

func lookupOutput(outputs Outputs, r expr.Ref) (any, bool, error) {
	id, field, ok := SplitRuntimeRef(r)
	if !ok {
		return nil, false, fmt.Errorf("not a runtime reference")
	}
	out, ok := outputs(id)
	if !ok {
		return nil, false, nil
	}
	var cur any = out
	for _, st := range field {
		switch c := cur.(type) {
		case map[string]any:
			if st.IsIndex {
				return nil, false, nil
			}
			v, ok := c[st.Name]
			if !ok {
				return nil, false, nil
			}
			cur = v
		case []any:
			if !st.IsIndex || st.Index >= len(c) {
				return nil, false, nil
			}
			cur = c[st.Index]
		default:
			return nil, false, nil
		}
	}
	return cur, true, nil
}

// stringAt finds the string at ptr in v and returns a setter for its slot.
func stringAt(v any, ptr string) (set func(key string, val any), key, s string, ok bool) {
	toks := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	cur := v
	for i, tok := range toks {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		last := i == len(toks)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				s, ok = c[tok].(string)
				return func(k string, val any) { c[k] = val }, tok, s, ok
			}
			cur = c[tok]
		case []any:
			idx, err := strconv.Atoi(tok)
			if err != nil || idx < 0 || idx >= len(c) {
				return nil, "", "", false
			}
			if last {
				s, ok = c[idx].(string)
				return func(_ string, val any) { c[idx] = val }, tok, s, ok
			}
			cur = c[idx]
		default:
			return nil, "", "", false
		}
	}
	return nil, "", "", false
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = deepCopy(e)
		}
		return l
	default:
		return v
	}
}

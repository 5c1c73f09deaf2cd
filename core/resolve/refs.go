package resolve

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gcompose/gcompose/core/address"
	"github.com/gcompose/gcompose/core/expr"
	"github.com/gcompose/gcompose/core/graph"
	"github.com/gcompose/gcompose/core/source"
	"github.com/gcompose/gcompose/internal/jsonpointer"
)

// scope is where a value is resolved: inside a node (nil for meta), and the
// chain of pointers being expanded, to catch static reference loops.
type scope struct {
	node     *Node
	visiting []string
	// outputs: the descriptor's outputs section, read after apply from
	// what the resources report; it holds runtime references without
	// being a node that waits for them.
	outputs bool
}

// maxDepth bounds static references to values that hold references.
const maxDepth = 32

// output returns, for an output of a node of kind (Options.Outputs), its
// known sub-fields (nil: any); ok is false for a field written in the
// descriptor.
func (rv *resolver) output(kind Kind, field string) (subs []string, ok bool) {
	subs, ok = rv.opts.Outputs[kind][field]
	return subs, ok
}

// outputNames lists the outputs of a node of kind, for suggestions.
func (rv *resolver) outputNames(kind Kind) []string {
	return slices.Sorted(maps.Keys(rv.opts.Outputs[kind]))
}

func referenceRoots() []string {
	return []string{"services", "nodes", "networks", "payloads", "meta", "resources", "var", "env", "secret", "app", "instance"}
}

// resolveValue returns a copy of v (found at pointer ptr) with every string
// template resolved in scope sc, and the pointers (relative to v) of the
// strings that still hold runtime references.
//
// With final set (a node's Spec), every string is left in template form:
// text that must stay a literal "${" is escaped as "$${", so the whole Spec
// can be evaluated again at apply time (expr.EvalTree) without mistaking
// text for a reference. Without it (a value read by a static reference),
// fully known values are plain values, ready to be interpolated.
func (rv *resolver) resolveValue(sc *scope, ptr string, v any, final bool) (any, []string) {
	var templates []string
	out, _ := expr.WalkTemplates(v, func(rel, s string) (any, error) {
		before, failures := rv.kept, rv.failures
		val := rv.resolveString(sc, ptr+rel, s)
		switch {
		case rv.failures > failures: // reported; kept as written
		case rv.kept > before:
			templates = append(templates, rel)
		case final:
			val = escapeDeep(val)
		}
		return val, nil
	})
	return out, templates
}

// escapeDeep returns v with "${" in every string written as "$${".
func escapeDeep(v any) any {
	if !holdsTemplate(v) {
		return v
	}
	switch x := v.(type) {
	case string:
		return strings.ReplaceAll(x, "${", "$${")
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = escapeDeep(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = escapeDeep(e)
		}
		return l
	}
	return v
}

// resolveString resolves one string value standing at ptr. Problems are
// reported as diagnostics; the string is then kept as written.
func (rv *resolver) resolveString(sc *scope, ptr, s string) any {
	if !strings.Contains(s, "${") {
		return s
	}
	t, err := expr.Parse(s)
	if err != nil {
		off := 0
		var se *expr.SyntaxError
		if errors.As(err, &se) {
			off = se.Offset
			err = fmt.Errorf("%s", se.Msg)
		}
		rv.errorf(rv.refPos(ptr, s, off), "%v", err)
		rv.failures++
		return s
	}
	if t.IsLiteral() {
		return t.Literal()
	}
	failed := false
	keep := map[int]string{} // ref offset -> canonical text kept for apply
	val, unknown, perr := t.Partial(func(r expr.Ref) (any, bool, error) {
		v, known, kept, err := rv.lookup(sc, ptr, s, r)
		if err != nil {
			failed = true
			rv.errorf(rv.refPos(ptr, s, r.Offset), "%s: %v", refText(r), err)
			return nil, false, nil
		}
		if !known {
			keep[r.Offset] = kept
		}
		return v, known, nil
	}, func(r expr.Ref) string { return keep[r.Offset] })
	if perr != nil && !failed {
		failed = true
		rv.errorf(rv.app.Pos(ptr), "%v", perr)
	}
	if failed {
		rv.failures++
		return s
	}
	if len(unknown) > 0 {
		rv.kept++
	}
	return val
}

// refText is the reference as the user wrote it, for messages and labels.
func refText(r expr.Ref) string { return "${" + strings.TrimSpace(r.Raw) + "}" }

// lookup resolves one reference. It returns the value when the descriptor
// (or the options) know it now; otherwise known is false and kept is the
// canonical text to keep for apply, and the reference has become an edge.
func (rv *resolver) lookup(sc *scope, ptr, s string, r expr.Ref) (v any, known bool, kept string, err error) {
	p := r.Path
	root := p[0].Name
	switch root {
	case "services", "nodes":
		return rv.lookupService(sc, ptr, s, r)
	case "networks":
		name, rest, err := entryName(p, "network", rv.app.Networks)
		if err != nil {
			return nil, false, "", err
		}
		if len(rest) == 0 {
			return nil, false, "", fmt.Errorf("names network %q, not one of its fields: add one, e.g. ${networks.%s.ip}", name, name)
		}
		if f := rest[0]; !f.IsIndex {
			if subs, ok := rv.output(NetworkNode, f.Name); ok {
				return rv.runtime(sc, ptr, s, r, NetworkID(name), "network", rest, subs)
			}
		}
		return rv.static(sc, "networks."+name, pointer("networks", name), rest, rv.outputNames(NetworkNode))
	case "payloads":
		name, rest, err := entryName(p, "payload", rv.app.Payloads)
		if err != nil {
			return nil, false, "", err
		}
		return rv.static(sc, "payloads."+name, pointer("payloads", name), rest, nil)
	case "meta":
		return rv.static(sc, "meta", "/meta", p[1:], nil)
	case "resources":
		if len(p) > 2 && !p[1].IsIndex && rv.app.Resources[p[1].Name] == nil && rv.opts.Implicit != nil && rv.opts.Implicit(p[1].Name) {
			return rv.implicit(sc, ptr, s, r)
		}
		name, rest, err := entryName(p, "resource", rv.app.Resources)
		if err != nil {
			return nil, false, "", err
		}
		if len(rest) == 0 || rest[0].IsIndex || rest[0].Name != "config" && rest[0].Name != "state" {
			got := ""
			if len(rest) > 0 {
				got = fmt.Sprintf(" %q", rest[0].String())
			}
			return nil, false, "", fmt.Errorf("a resource reference reads config or state: ${resources.%s.config.KEY} or ${resources.%s.state.KEY}, not%s", name, name, orNothing(got))
		}
		if rest[0].Name == "state" {
			return rv.runtime(sc, ptr, s, r, ResourceID(name), "resource", rest, nil)
		}
		return rv.static(sc, "resources."+name+".config", pointer("resources", name, "config"), rest[1:], nil)
	case "var":
		if len(p) != 2 || p[1].IsIndex {
			return nil, false, "", fmt.Errorf("a variable reference is ${var.NAME}")
		}
		val, ok := rv.opts.Vars[p[1].Name]
		if !ok {
			return nil, false, "", fmt.Errorf("variable %q is not set: pass --var %s=VALUE, a --var-file or GCOMPOSE_VAR_%s%s", p[1].Name, p[1].Name, p[1].Name, source.Suggest(p[1].Name, slices.Sorted(maps.Keys(rv.opts.Vars))))
		}
		return val, true, "", nil
	case "env":
		if len(p) != 2 || p[1].IsIndex {
			return nil, false, "", fmt.Errorf("an environment reference is ${env.NAME}")
		}
		val, ok := rv.opts.Env(p[1].Name)
		if !ok {
			return nil, false, "", fmt.Errorf("environment variable %s is not set", p[1].Name)
		}
		return val, true, "", nil
	case "secret":
		return rv.lookupSecret(p)
	case "app":
		if len(p) != 2 || p[1].IsIndex || p[1].Name != "name" && p[1].Name != "id" {
			return nil, false, "", fmt.Errorf("the app built-ins are ${app.name} and ${app.id}%s", suggestPath(p, []string{"name", "id"}))
		}
		if p[1].Name == "name" {
			return rv.app.Name, true, "", nil
		}
		if rv.opts.AppID != "" {
			return rv.opts.AppID, true, "", nil
		}
		return nil, false, "${app.id}", nil
	case "instance":
		if len(p) != 2 || p[1].IsIndex || p[1].Name != "index" {
			return nil, false, "", fmt.Errorf("the instance built-in is ${instance.index}")
		}
		if sc.node == nil || sc.node.Kind != ServiceNode {
			return nil, false, "", fmt.Errorf("${instance.index} is only defined inside a service (or its payload)")
		}
		return sc.node.Index, true, "", nil
	default:
		return nil, false, "", fmt.Errorf("unknown reference root %q%s; references start with %s", root, source.Suggest(root, referenceRoots()), strings.Join(referenceRoots(), ", "))
	}
}

func orNothing(s string) string {
	if s == "" {
		return " nothing"
	}
	return s
}

func suggestPath(p []expr.Step, known []string) string {
	if len(p) < 2 || p[1].IsIndex {
		return ""
	}
	return source.Suggest(p[1].Name, known)
}

// entryName checks p[1] names an entry of m and returns it with the rest of
// the path.
func entryName[V any](p []expr.Step, what string, m map[string]V) (string, []expr.Step, error) {
	if len(p) < 2 || p[1].IsIndex {
		return "", nil, fmt.Errorf("a %s reference is ${%ss.NAME.FIELD}", what, what)
	}
	name := p[1].Name
	if _, ok := m[name]; !ok {
		return "", nil, fmt.Errorf("no %s named %q%s", what, name, source.Suggest(name, slices.Sorted(maps.Keys(m))))
	}
	return name, p[2:], nil
}

// lookupService handles services.NAME[i].FIELD and its alias nodes.
func (rv *resolver) lookupService(sc *scope, ptr, s string, r expr.Ref) (any, bool, string, error) {
	name, rest, err := entryName(r.Path, "service", rv.app.Services)
	if err != nil {
		return nil, false, "", err
	}
	insts := rv.services[name]
	index := -1
	if len(rest) > 0 && rest[0].IsIndex {
		index = rest[0].Index
		rest = rest[1:]
		if index >= len(insts) {
			return nil, false, "", fmt.Errorf("service %q has %d instance(s): index %d is out of range 0..%d", name, len(insts), index, len(insts)-1)
		}
	}
	if len(rest) == 0 {
		return nil, false, "", fmt.Errorf("names service %q, not one of its fields: add one, e.g. ${services.%s.network_node.ip}", name, name)
	}
	if f := rest[0]; !f.IsIndex {
		if subs, ok := rv.output(ServiceNode, f.Name); ok {
			if index < 0 && len(insts) > 1 {
				field := expr.PathString(rest)
				return nil, false, "", fmt.Errorf("service %q has %d instances: say which one, e.g. ${services.%s[0].%s} .. ${services.%s[%d].%s}",
					name, len(insts), name, field, name, len(insts)-1, field)
			}
			target := insts[max(index, 0)].ID
			return rv.runtime(sc, ptr, s, r, target, "service", rest, subs)
		}
	}
	return rv.static(sc, "services."+name, pointer("services", name), rest, rv.outputNames(ServiceNode))
}

// implicit reads the state of a resource the lowering adds (Options.
// Implicit). Only the outputs section may: it is read after apply, while a
// node's reference would be an edge to a resource the graph does not hold
// yet.
func (rv *resolver) implicit(sc *scope, ptr, s string, r expr.Ref) (any, bool, string, error) {
	name, rest := r.Path[1].Name, r.Path[2:]
	if rest[0].IsIndex || rest[0].Name != "state" || len(rest) < 2 {
		return nil, false, "", fmt.Errorf("a reference to resources.%s reads its state: ${resources.%s.state.KEY}", name, name)
	}
	if sc.node != nil || !sc.outputs {
		return nil, false, "", fmt.Errorf("resources.%s is added by the lowering, not written in the descriptor: only the outputs section can read its state", name)
	}
	return rv.runtime(sc, ptr, s, r, ResourceID(name), "resource", rest, nil)
}

// runtime keeps a reference to a runtime output of target for apply time and
// records the dependency edge it implies.
func (rv *resolver) runtime(sc *scope, ptr, s string, r expr.Ref, target, what string, rest []expr.Step, subs []string) (any, bool, string, error) {
	field := expr.PathString(rest)
	if len(subs) > 0 {
		if len(rest) > 1 && !rest[1].IsIndex && !slices.Contains(subs, rest[1].Name) {
			return nil, false, "", fmt.Errorf("%s output %s has no field %q%s; it has %s", what, rest[0].Name, rest[1].Name, source.Suggest(rest[1].Name, subs), strings.Join(subs, ", "))
		}
	}
	if sc.node == nil {
		if sc.outputs {
			return nil, false, "${" + target + "." + field + "}", nil
		}
		return nil, false, "", fmt.Errorf("%s.%s is only known at apply time, and meta is read before anything exists", target, field)
	}
	pos := rv.refPos(ptr, s, r.Offset)
	rv.edge(graph.Edge{From: sc.node.ID, To: target, Kind: graph.Reference, Reason: refText(r), Pos: pos})
	sc.node.Runtime = append(sc.node.Runtime, RuntimeRef{Target: target, Field: field, Text: refText(r), Pointer: ptr, Pos: pos})
	return nil, false, address.Ref(target, field), nil
}

// static reads a field written in the descriptor: the subtree at base
// (pointer), followed along rest. A string found there that holds
// references is itself resolved in the referring scope.
func (rv *resolver) static(sc *scope, label, base string, rest []expr.Step, runtimeFields []string) (any, bool, string, error) {
	cur := rv.at(base)
	ptr := base
	for i, st := range rest {
		switch c := cur.(type) {
		case map[string]any:
			if st.IsIndex {
				return nil, false, "", fmt.Errorf("%s is a mapping, not a list: %s cannot be used on it", labelOf(label, rest[:i]), st)
			}
			v, ok := c[st.Name]
			if !ok {
				known := slices.Sorted(maps.Keys(c))
				if i == 0 {
					known = append(known, runtimeFields...)
				}
				return nil, false, "", fmt.Errorf("%s has no field %q%s", labelOf(label, rest[:i]), st.Name, source.Suggest(st.Name, known))
			}
			cur, ptr = v, ptr+"/"+jsonpointer.Escape(st.Name)
		case []any:
			if !st.IsIndex {
				return nil, false, "", fmt.Errorf("%s is a list: index it with [i], not .%s", labelOf(label, rest[:i]), st.Name)
			}
			if st.Index >= len(c) {
				return nil, false, "", fmt.Errorf("%s has %d item(s): index %d is out of range", labelOf(label, rest[:i]), len(c), st.Index)
			}
			cur, ptr = c[st.Index], ptr+"/"+strconv.Itoa(st.Index)
		default:
			return nil, false, "", fmt.Errorf("%s is a single value: it has no %s", labelOf(label, rest[:i]), st)
		}
	}
	// The value may itself hold references: resolve them here, in the
	// referring scope, and refuse loops.
	if !holdsTemplate(cur) {
		return cur, true, "", nil
	}
	for _, v := range sc.visiting {
		if v == ptr {
			return nil, false, "", fmt.Errorf("reference loop: %s refers back to itself through %s", labelOf(label, rest), strings.Join(sc.visiting, " -> "))
		}
	}
	if len(sc.visiting) >= maxDepth {
		return nil, false, "", fmt.Errorf("references nested more than %d deep", maxDepth)
	}
	inner := &scope{node: sc.node, visiting: append(append([]string(nil), sc.visiting...), ptr), outputs: sc.outputs}
	errorsBefore := len(rv.diags)
	val, templates := rv.resolveValue(inner, ptr, cur, false)
	if len(rv.diags) > errorsBefore {
		return nil, false, "", fmt.Errorf("%s cannot be resolved: it holds a reference in error (%s)", labelOf(label, rest), rv.app.Pos(ptr))
	}
	if len(templates) > 0 {
		// A runtime value (now an edge of this node) inside: keep the
		// resolved template for apply.
		if str, ok := val.(string); ok {
			return nil, false, str, nil
		}
		return nil, false, "", fmt.Errorf("%s holds values known only at apply time; refer to a single string or to the runtime field itself", labelOf(label, rest))
	}
	return val, true, "", nil
}

func labelOf(label string, steps []expr.Step) string {
	if len(steps) == 0 {
		return label
	}
	return label + "." + expr.PathString(steps)
}

// at returns the value at a JSON pointer of the tree.
func (rv *resolver) at(ptr string) any {
	var cur any = rv.tree
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = jsonpointer.Unescape(tok)
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

// holdsTemplate reports whether a string in v contains "${".
func holdsTemplate(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.Contains(x, "${")
	case map[string]any:
		for _, e := range x {
			if holdsTemplate(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if holdsTemplate(e) {
				return true
			}
		}
	}
	return false
}

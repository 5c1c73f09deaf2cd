package resolve

import (
	"fmt"
	"strconv"

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
// evaluated from outputs (a lone reference keeps the output's type) and
// "$${" escapes turned into text. Those whose value is not there yet are
// listed in unknown (their strings stay templates): the engine asks the
// dependency again, or fails naming them.
func (n *Node) Bind(outputs Outputs) (spec map[string]any, unknown []expr.Unknown, err error) {
	out, unknown, err := expr.EvalTree(n.Spec, func(r expr.Ref) (any, bool, error) { return lookupOutput(outputs, r) })
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", n.ID, err)
	}
	spec, _ = out.(map[string]any)
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

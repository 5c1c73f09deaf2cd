package graph

import "fmt"

// Recorded is the kind of an edge read back from a state: the dependencies
// the engine persisted with a deployed resource.
const Recorded Kind = "recorded"

// StatusAttr is the vertex attribute holding a deployed resource's status
// ("Active", "Pending", ...); output shows it under the vertex's ID.
const StatusAttr = "status"

// ImplicitAttr marks a vertex the descriptor does not name: a resource the
// deploy adds (a Golem app's payments, a service's local proxy). Output says
// so under its ID, and DOT draws it dashed.
const ImplicitAttr = "implicit"

// Implicit is the kind of an edge to or from an implicit resource.
const Implicit Kind = "implicit"

// vertexLabel is the ID, followed by the status when the vertex has one, or
// by "implicit".
func vertexLabel(v Vertex, sep string) string {
	if st, ok := v.Attrs[StatusAttr]; ok && st != "" {
		return fmt.Sprintf("%s%s(%v)", v.ID, sep, st)
	}
	if isImplicit(v) {
		return v.ID + sep + "(implicit)"
	}
	return v.ID
}

func isImplicit(v Vertex) bool { b, _ := v.Attrs[ImplicitAttr].(bool); return b }

// statusColor colors a deployed resource in DOT by its status.
func statusColor(v Vertex) string {
	switch fmt.Sprint(v.Attrs[StatusAttr]) {
	case "Active":
		return "darkgreen"
	case "Pending":
		return "orange"
	case "Terminated":
		return "red"
	}
	return ""
}

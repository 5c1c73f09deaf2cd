package graph

import "fmt"

// Recorded is the kind of an edge read back from a state: the dependencies
// the engine persisted with a deployed resource.
const Recorded Kind = "recorded"

// StatusAttr is the vertex attribute holding a deployed resource's status
// ("Active", "Pending", ...); output shows it under the vertex's ID.
const StatusAttr = "status"

// vertexLabel is the ID, followed by the status when the vertex has one.
func vertexLabel(v Vertex, sep string) string {
	if st, ok := v.Attrs[StatusAttr]; ok && st != "" {
		return fmt.Sprintf("%s%s(%v)", v.ID, sep, st)
	}
	return v.ID
}

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

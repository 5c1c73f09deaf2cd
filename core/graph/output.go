package graph

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// WriteDOT writes the graph in Graphviz DOT. Every edge is labelled with why
// it exists (its kind and reason) and where (its position).
func (g *Graph) WriteDOT(w io.Writer) error {
	var b strings.Builder
	b.WriteString("digraph gcompose {\n  rankdir=\"BT\";\n  node [shape=box];\n")
	for _, v := range g.Vertices() {
		fmt.Fprintf(&b, "  %s [label=%s", strconv.Quote(v.ID), strconv.Quote(vertexLabel(v, "\n")))
		if shape := dotShape(v.Kind); shape != "" {
			fmt.Fprintf(&b, ", shape=%s", shape)
		}
		if color := statusColor(v); color != "" {
			fmt.Fprintf(&b, ", color=%s", color)
		}
		if isImplicit(v) {
			b.WriteString(", style=dashed")
		}
		b.WriteString("];\n")
	}
	for _, e := range g.Edges() {
		fmt.Fprintf(&b, "  %s -> %s [label=%s];\n", strconv.Quote(e.From), strconv.Quote(e.To), strconv.Quote(edgeLabel(e)))
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func dotShape(kind string) string {
	switch kind {
	case "network":
		return "ellipse"
	case "resource":
		return "component"
	default:
		return ""
	}
}

// edgeLabel: "depends_on", "network", "${services.db.network_node.ip} at
// app.yaml:30:70", "dependency db".
func edgeLabel(e Edge) string {
	l := string(e.Kind)
	if e.Kind == Reference && e.Reason != "" {
		l = e.Reason
	} else if e.Reason != "" && e.Reason != l {
		l += " " + e.Reason
	}
	if e.Pos.IsValid() {
		l += " at " + e.Pos.String()
	}
	return l
}

// jsonGraph is the --format json shape: stable, for tools.
type jsonGraph struct {
	Vertices []Vertex `json:"vertices"`
	Edges    []Edge   `json:"edges"`
}

// WriteJSON writes {"vertices": [{id, kind, attributes}], "edges": [{from,
// to, kind, reason, pos}]}, both sorted.
func (g *Graph) WriteJSON(w io.Writer) error {
	out := jsonGraph{Vertices: g.Vertices(), Edges: g.Edges()}
	if out.Vertices == nil {
		out.Vertices = []Vertex{}
	}
	if out.Edges == nil {
		out.Edges = []Edge{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("writing graph as JSON: %w", err)
	}
	return nil
}

// WriteMermaid writes a Mermaid flowchart. Mermaid IDs cannot hold dots or
// brackets, so vertices are n0, n1, ... in ID order, labelled with their ID.
func (g *Graph) WriteMermaid(w io.Writer) error {
	var b strings.Builder
	b.WriteString("flowchart BT\n")
	ids := map[string]string{}
	for i, v := range g.Vertices() {
		ids[v.ID] = "n" + strconv.Itoa(i)
		fmt.Fprintf(&b, "  %s[\"%s\"]\n", ids[v.ID], mermaidEscape(vertexLabel(v, " ")))
	}
	for _, e := range g.Edges() {
		fmt.Fprintf(&b, "  %s -->|\"%s\"| %s\n", ids[e.From], mermaidEscape(edgeLabel(e)), ids[e.To])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mermaidEscape replaces the characters Mermaid labels cannot hold with
// their HTML entities.
func mermaidEscape(s string) string {
	r := strings.NewReplacer(`"`, "#quot;", "|", "#124;", "<", "#lt;", ">", "#gt;", "{", "#123;", "}", "#125;")
	return r.Replace(s)
}

// Package graph is a small directed acyclic graph in the style of
// Terraform's internal/dag: string vertex IDs, labelled edges that say why
// they exist, cycle reports that print each cycle whole, a deterministic
// topological order, a parallel walker, and DOT / JSON / Mermaid output.
//
// An edge From -> To means From depends on To: To is created first and
// destroyed last.
package graph

import (
	"fmt"
	"slices"
	"sort"

	"github.com/gcompose/gcompose/core/source"
)

// Kind says why an edge exists.
type Kind string

const (
	Network    Kind = "network"    // a service joins its network
	DependsOn  Kind = "depends_on" // explicit depends_on
	Reference  Kind = "reference"  // a ${...} reference to a runtime value
	Dependency Kind = "dependency" // a generic resource's dependencies alias
)

// Edge is one labelled dependency: From depends on To.
type Edge struct {
	From   string     `json:"from"`
	To     string     `json:"to"`
	Kind   Kind       `json:"kind"`
	Reason string     `json:"reason,omitempty"` // e.g. "${services.db.network_node.ip}" or a dependency alias
	Pos    source.Pos `json:"pos"`
}

// Describe renders the edge for a user: "alpha depends on gamma (depends_on)".
func (e Edge) Describe() string {
	if e.Reason != "" && e.Reason != string(e.Kind) {
		return fmt.Sprintf("%s depends on %s (%s %s)", e.From, e.To, e.Kind, e.Reason)
	}
	return fmt.Sprintf("%s depends on %s (%s)", e.From, e.To, e.Kind)
}

// Vertex is a node of the graph.
type Vertex struct {
	ID    string         `json:"id"`
	Kind  string         `json:"kind,omitempty"`
	Attrs map[string]any `json:"attributes,omitempty"`
}

// Graph holds vertices and labelled edges. Several edges may join the same
// pair (a network and a reference); the walk and the order consider the pair
// once. The zero value is not usable: call New.
type Graph struct {
	verts []Vertex
	index map[string]int
	edges []Edge
	// deps[i] are the distinct vertices i depends on; rdeps[i] those that
	// depend on i.
	deps, rdeps [][]int
	// pairs maps a (from, to) pair to the index of its first labelled edge;
	// next[i] is the index of the next edge of edge i's pair, or -1.
	pairs map[[2]int]int
	next  []int
}

// New returns an empty graph.
func New() *Graph {
	return &Graph{index: map[string]int{}, pairs: map[[2]int]int{}}
}

// Grow makes room for about vertices more vertices and edges more edges, so
// building a large graph does not reallocate as it goes.
func (g *Graph) Grow(vertices, edges int) {
	g.verts = slices.Grow(g.verts, vertices)
	g.deps = slices.Grow(g.deps, vertices)
	g.rdeps = slices.Grow(g.rdeps, vertices)
	g.edges = slices.Grow(g.edges, edges)
	g.next = slices.Grow(g.next, edges)
	if len(g.index) == 0 && vertices > 0 {
		g.index = make(map[string]int, vertices)
	}
	if len(g.pairs) == 0 && edges > 0 {
		g.pairs = make(map[[2]int]int, edges)
	}
}

// AddVertex adds a vertex; adding an existing ID updates its kind and attributes.
func (g *Graph) AddVertex(id, kind string, attrs map[string]any) {
	if i, ok := g.index[id]; ok {
		g.verts[i].Kind, g.verts[i].Attrs = kind, attrs
		return
	}
	g.index[id] = len(g.verts)
	g.verts = append(g.verts, Vertex{ID: id, Kind: kind, Attrs: attrs})
	g.deps = append(g.deps, nil)
	g.rdeps = append(g.rdeps, nil)
}

// HasVertex reports whether id is a vertex.
func (g *Graph) HasVertex(id string) bool { _, ok := g.index[id]; return ok }

// AddEdge adds e (e.From depends on e.To). Both vertices must exist. An edge
// equal to one already present (same ends, kind and reason) is ignored, so the
// first position is kept.
func (g *Graph) AddEdge(e Edge) error {
	f, ok := g.index[e.From]
	if !ok {
		return fmt.Errorf("edge %s -> %s: no vertex %q", e.From, e.To, e.From)
	}
	t, ok := g.index[e.To]
	if !ok {
		return fmt.Errorf("edge %s -> %s: no vertex %q", e.From, e.To, e.To)
	}
	pair := [2]int{f, t}
	head, seen := g.pairs[pair]
	if !seen {
		g.deps[f] = append(g.deps[f], t)
		g.rdeps[t] = append(g.rdeps[t], f)
		head = -1
	}
	for i := head; i >= 0; i = g.next[i] {
		if g.edges[i].Kind == e.Kind && g.edges[i].Reason == e.Reason {
			return nil // same label: keep the first position
		}
	}
	g.pairs[pair] = len(g.edges)
	g.next = append(g.next, head)
	g.edges = append(g.edges, e)
	return nil
}

// EdgeCount returns the number of labelled edges.
func (g *Graph) EdgeCount() int { return len(g.edges) }

// Vertices returns the vertices sorted by ID.
func (g *Graph) Vertices() []Vertex {
	out := append([]Vertex(nil), g.verts...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Edges returns every labelled edge, sorted by from, to, kind and reason.
func (g *Graph) Edges() []Edge {
	out := append([]Edge(nil), g.edges...)
	sortEdges(out)
	return out
}

func sortEdges(es []Edge) {
	sort.Slice(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.From != b.From {
			return a.From < b.From
		}
		if a.To != b.To {
			return a.To < b.To
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Reason < b.Reason
	})
}

// DependenciesOf returns the IDs id depends on, sorted.
func (g *Graph) DependenciesOf(id string) []string { return g.names(g.deps, id) }

// DependentsOf returns the IDs that depend on id, sorted.
func (g *Graph) DependentsOf(id string) []string { return g.names(g.rdeps, id) }

func (g *Graph) names(adj [][]int, id string) []string {
	i, ok := g.index[id]
	if !ok {
		return nil
	}
	out := make([]string, len(adj[i]))
	for k, j := range adj[i] {
		out[k] = g.verts[j].ID
	}
	sort.Strings(out)
	return out
}

// EdgesBetween returns the labelled edges from -> to.
func (g *Graph) EdgesBetween(from, to string) []Edge {
	f, ok1 := g.index[from]
	t, ok2 := g.index[to]
	if !ok1 || !ok2 {
		return nil
	}
	return g.pairEdges(f, t)
}

func (g *Graph) pairEdges(f, t int) []Edge {
	head, ok := g.pairs[[2]int{f, t}]
	if !ok {
		return nil
	}
	var out []Edge
	for i := head; i >= 0; i = g.next[i] {
		out = append(out, g.edges[i])
	}
	sortEdges(out)
	return out
}

// rank returns, for each vertex index, its position in ID order, used to
// break ties deterministically.
func (g *Graph) rank() []int {
	order := make([]int, len(g.verts))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return g.verts[order[a]].ID < g.verts[order[b]].ID })
	r := make([]int, len(order))
	for pos, i := range order {
		r[i] = pos
	}
	return r
}

package graph

import (
	"fmt"
	"sort"
	"strings"
)

// Cycle is one cycle, as the edges that make it, in order: the first edge
// leaves the cycle's smallest vertex ID and the last one returns to it.
// Where several labelled edges join the same two vertices, all are listed.
type Cycle struct {
	Path  []string // alpha, gamma, beta, alpha
	Edges []Edge
}

func (c Cycle) String() string {
	var b strings.Builder
	b.WriteString("cycle: ")
	b.WriteString(strings.Join(c.Path, " -> "))
	for _, e := range c.Edges {
		fmt.Fprintf(&b, "\n%s: %s", e.Pos, e.Describe())
	}
	return b.String()
}

// CycleError reports every cycle of a graph (one per strongly connected
// component, printed whole).
type CycleError struct{ Cycles []Cycle }

func (e *CycleError) Error() string {
	parts := make([]string, len(e.Cycles))
	for i, c := range e.Cycles {
		parts[i] = c.String()
	}
	return strings.Join(parts, "\n")
}

// Validate returns a *CycleError when the graph has a cycle, else nil.
func (g *Graph) Validate() error {
	if cs := g.Cycles(); len(cs) > 0 {
		return &CycleError{Cycles: cs}
	}
	return nil
}

// Cycles finds one cycle in every strongly connected component that has one
// (Tarjan's algorithm, linear in vertices and edges), each starting at its
// smallest vertex ID and as short as possible; sorted by that ID.
func (g *Graph) Cycles() []Cycle {
	var out []Cycle
	rank := g.rank()
	for _, scc := range g.sccs() {
		if len(scc) == 1 {
			v := scc[0]
			if _, self := g.pairs[[2]int{v, v}]; !self {
				continue
			}
		}
		out = append(out, g.cycleIn(scc, rank))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path[0] < out[j].Path[0] })
	return out
}

// cycleIn returns the shortest cycle through the smallest vertex of scc,
// found by a breadth-first search that stays inside the component and visits
// neighbours in ID order.
func (g *Graph) cycleIn(scc []int, rank []int) Cycle {
	in := make(map[int]bool, len(scc))
	start := scc[0]
	for _, v := range scc {
		in[v] = true
		if rank[v] < rank[start] {
			start = v
		}
	}
	prev := map[int]int{}
	queue := []int{start}
	var last = -1
	for len(queue) > 0 && last < 0 {
		v := queue[0]
		queue = queue[1:]
		next := append([]int(nil), g.deps[v]...)
		sort.Slice(next, func(a, b int) bool { return rank[next[a]] < rank[next[b]] })
		for _, w := range next {
			if !in[w] {
				continue
			}
			if w == start {
				last = v
				break
			}
			if _, seen := prev[w]; !seen {
				prev[w] = v
				queue = append(queue, w)
			}
		}
	}
	// Walk back from last to start.
	rev := []int{start, last}
	for v := last; v != start; {
		v = prev[v]
		rev = append(rev, v)
	}
	if last == start {
		rev = rev[:2]
	}
	c := Cycle{}
	for i := len(rev) - 1; i >= 0; i-- {
		c.Path = append(c.Path, g.verts[rev[i]].ID)
	}
	for i := len(rev) - 1; i > 0; i-- {
		c.Edges = append(c.Edges, g.pairEdges(rev[i], rev[i-1])...)
	}
	return c
}

// sccs returns the strongly connected components (iterative Tarjan, so deep
// graphs do not grow the stack).
func (g *Graph) sccs() [][]int {
	n := len(g.verts)
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var out [][]int
	next := 0
	type frame struct{ v, edge int }
	for root := 0; root < n; root++ {
		if index[root] >= 0 {
			continue
		}
		call := []frame{{root, 0}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			v := f.v
			if f.edge < len(g.deps[v]) {
				w := g.deps[v][f.edge]
				f.edge++
				if index[w] < 0 {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{w, 0})
				} else if onStack[w] && index[w] < low[v] {
					low[v] = index[w]
				}
				continue
			}
			call = call[:len(call)-1]
			if len(call) > 0 {
				if p := call[len(call)-1].v; low[v] < low[p] {
					low[p] = low[v]
				}
			}
			if low[v] == index[v] {
				var comp []int
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp = append(comp, w)
					if w == v {
						break
					}
				}
				out = append(out, comp)
			}
		}
	}
	return out
}

package graph

import "container/heap"

// TopoOrder returns every vertex ID, dependencies before their dependents,
// ties broken by ID so the order is the same on every run. It fails with a
// *CycleError when the graph has a cycle. O((V+E) log V).
func (g *Graph) TopoOrder() ([]string, error) {
	n := len(g.verts)
	rank := g.rank()
	pending := make([]int, n)
	h := &rankHeap{rank: rank}
	for i := 0; i < n; i++ {
		pending[i] = len(g.deps[i])
		if pending[i] == 0 {
			h.items = append(h.items, i)
		}
	}
	heap.Init(h)
	out := make([]string, 0, n)
	for h.Len() > 0 {
		v := heap.Pop(h).(int)
		out = append(out, g.verts[v].ID)
		for _, d := range g.rdeps[v] {
			pending[d]--
			if pending[d] == 0 {
				heap.Push(h, d)
			}
		}
	}
	if len(out) != n {
		return nil, g.Validate()
	}
	return out, nil
}

// rankHeap is a min-heap of vertex indexes ordered by ID rank.
type rankHeap struct {
	items []int
	rank  []int
}

func (h *rankHeap) Len() int           { return len(h.items) }
func (h *rankHeap) Less(i, j int) bool { return h.rank[h.items[i]] < h.rank[h.items[j]] }
func (h *rankHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *rankHeap) Push(x any)         { h.items = append(h.items, x.(int)) }
func (h *rankHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

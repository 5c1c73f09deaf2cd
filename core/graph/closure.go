package graph

// Closures over a plain dependency map (name -> the names it depends on),
// the form the planner and the reconciler hold before (or without) a Graph:
// one walk, so that "what depends on this, transitively" is computed the
// same way by `--target` on destroy and by a drift repair.

// Dependents inverts deps: for each name, the names that depend on it
// (in no particular order).
func Dependents(deps map[string][]string) map[string][]string {
	out := make(map[string][]string, len(deps))
	for n, ds := range deps {
		for _, d := range ds {
			out[d] = append(out[d], n)
		}
	}
	return out
}

// Reach is every name reachable from starts over adj, starts included.
func Reach(adj map[string][]string, starts []string) map[string]bool {
	in := make(map[string]bool, len(starts))
	queue := make([]string, 0, len(starts))
	for _, s := range starts {
		if !in[s] {
			in[s] = true
			queue = append(queue, s)
		}
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, m := range adj[n] {
			if !in[m] {
				in[m] = true
				queue = append(queue, m)
			}
		}
	}
	return in
}

// Descendants is starts and, transitively, everything that depends on
// them in deps (name -> the names it depends on).
func Descendants(deps map[string][]string, starts []string) map[string]bool {
	return Reach(Dependents(deps), starts)
}

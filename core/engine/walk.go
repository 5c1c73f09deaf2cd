package engine

import (
	"context"
	"fmt"
	"sort"

	"github.com/gcompose/gcompose/core/graph"
	"github.com/gcompose/gcompose/core/plan"
)

// GraphWalk adapts graph.Walk to the planner's and executor's plan.Walk,
// bounded by parallelism.
func GraphWalk(parallelism int) plan.Walk {
	return func(ctx context.Context, deps map[string][]string, reverse bool, fn func(context.Context, string) error) map[string]error {
		g := graph.New()
		names := make([]string, 0, len(deps))
		for n := range deps {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			g.AddVertex(n, "", nil)
		}
		for _, n := range names {
			for _, d := range deps[n] {
				if !g.HasVertex(d) {
					continue // a dependency outside this walk is already settled
				}
				_ = g.AddEdge(graph.Edge{From: n, To: d, Kind: graph.DependsOn})
			}
		}
		res, err := graph.Walk(ctx, g, parallelism, reverse, graph.WalkFunc(fn))
		out := map[string]error{}
		if res == nil {
			for _, n := range names {
				out[n] = err
			}
			return out
		}
		for id, o := range res.Outcomes {
			switch {
			case o.Status == graph.Failed:
				out[id] = o.Err
			case o.Status == graph.Skipped && o.Cause != "":
				out[id] = fmt.Errorf("not started: %s failed", o.Cause)
			case o.Status == graph.Skipped:
				// The walk was cut short: say why (an interrupt), not just
				// "context canceled".
				cause := o.Err
				if c := context.Cause(ctx); c != nil {
					cause = c
				}
				out[id] = fmt.Errorf("not started: %w", cause)
			}
		}
		return out
	}
}

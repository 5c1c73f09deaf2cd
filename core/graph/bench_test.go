package graph

import (
	"context"
	"strconv"
	"testing"

	"github.com/gcompose/gcompose/internal/benchmetrics"
)

// wide: one root and n-1 vertices depending on it. deep: a chain of n.
// mixed: layers of 100, each vertex depending on two of the layer below.
func benchGraph(b *testing.B, shape string, n int) *Graph {
	b.Helper()
	g := New()
	id := func(i int) string { return "services.s" + strconv.Itoa(i) }
	for i := 0; i < n; i++ {
		g.AddVertex(id(i), "service", nil)
	}
	add := func(from, to int) {
		if err := g.AddEdge(Edge{From: id(from), To: id(to), Kind: Reference, Reason: "${" + id(to) + ".network_node.ip}"}); err != nil {
			b.Fatal(err)
		}
	}
	for i := 1; i < n; i++ {
		switch shape {
		case "wide":
			add(i, 0)
		case "deep":
			add(i, i-1)
		case "mixed":
			if i >= 100 {
				add(i, i-100)
				add(i, i-100+(i%7+1)%100)
			}
		}
	}
	return g
}

func BenchmarkWalk10k(b *testing.B) {
	for _, shape := range []string{"wide", "deep", "mixed"} {
		b.Run(shape, func(b *testing.B) {
			g := benchGraph(b, shape, 10000)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := benchmetrics.CPU()
			for i := 0; i < b.N; i++ {
				if _, err := Walk(context.Background(), g, 10, false, func(context.Context, string) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
			benchmetrics.ReportCPU(b, cpu)
		})
	}
}

func BenchmarkTopoAndCycles10k(b *testing.B) {
	g := benchGraph(b, "mixed", 10000)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchmetrics.CPU()
	for i := 0; i < b.N; i++ {
		if _, err := g.TopoOrder(); err != nil {
			b.Fatal(err)
		}
		if err := g.Validate(); err != nil {
			b.Fatal(err)
		}
	}
	benchmetrics.ReportCPU(b, cpu)
}

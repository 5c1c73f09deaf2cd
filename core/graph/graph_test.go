package graph

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/source"
	"github.com/gcompose/gcompose/internal/golden"
)

// build makes a graph from "a->b" specs (a depends on b); every name becomes a vertex.
func build(t testing.TB, specs ...string) *Graph {
	t.Helper()
	g := New()
	for i, s := range specs {
		from, to, ok := strings.Cut(s, "->")
		if !ok {
			g.AddVertex(s, "service", nil)
			continue
		}
		g.AddVertex(from, "service", nil)
		g.AddVertex(to, "service", nil)
		if err := g.AddEdge(Edge{From: from, To: to, Kind: DependsOn, Pos: source.Pos{File: "app.yaml", Line: i + 1, Col: 5}}); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

func TestAddEdgeUnknownVertexAndDuplicates(t *testing.T) {
	g := New()
	g.AddVertex("a", "service", nil)
	if err := g.AddEdge(Edge{From: "a", To: "zz", Kind: DependsOn}); err == nil || !strings.Contains(err.Error(), `no vertex "zz"`) {
		t.Fatalf("err = %v", err)
	}
	g.AddVertex("b", "service", nil)
	for i := 0; i < 2; i++ {
		_ = g.AddEdge(Edge{From: "a", To: "b", Kind: DependsOn, Pos: source.Pos{File: "x", Line: i + 1}})
	}
	_ = g.AddEdge(Edge{From: "a", To: "b", Kind: Reference, Reason: "${services.b.state}"})
	if n := len(g.Edges()); n != 2 {
		t.Errorf("edges = %d, want 2 (duplicate label dropped)", n)
	}
	if got := g.EdgesBetween("a", "b")[0].Pos.Line; got != 1 {
		t.Errorf("kept position line %d, want the first (1)", got)
	}
	if got := g.DependenciesOf("a"); !reflect.DeepEqual(got, []string{"b"}) {
		t.Errorf("deps = %v", got)
	}
	if got := g.DependentsOf("b"); !reflect.DeepEqual(got, []string{"a"}) {
		t.Errorf("dependents = %v", got)
	}
}

func TestCycles(t *testing.T) {
	tests := []struct {
		name  string
		specs []string
		want  string
	}{
		{"none", []string{"a->b", "b->c", "a->c"}, ""},
		{"three", []string{"alpha->gamma", "gamma->beta", "beta->alpha", "delta->alpha"},
			"cycle: alpha -> gamma -> beta -> alpha\n" +
				"app.yaml:1:5: alpha depends on gamma (depends_on)\n" +
				"app.yaml:2:5: gamma depends on beta (depends_on)\n" +
				"app.yaml:3:5: beta depends on alpha (depends_on)"},
		{"self", []string{"a->a"}, "cycle: a -> a\napp.yaml:1:5: a depends on a (depends_on)"},
		{"two components, shortest cycle", []string{"x->y", "y->x", "b->c", "c->d", "d->b", "b->d"},
			"cycle: b -> d -> b\n" +
				"app.yaml:6:5: b depends on d (depends_on)\n" +
				"app.yaml:5:5: d depends on b (depends_on)\n" +
				"cycle: x -> y -> x\n" +
				"app.yaml:1:5: x depends on y (depends_on)\n" +
				"app.yaml:2:5: y depends on x (depends_on)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := build(t, tt.specs...).Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			var ce *CycleError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *CycleError", err)
			}
			if err.Error() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", err, tt.want)
			}
		})
	}
}

func TestTopoOrder(t *testing.T) {
	g := build(t, "web->db", "web->net", "db->net", "cache->net", "api->cache", "api->db", "lonely")
	got, err := g.TopoOrder()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"lonely", "net", "cache", "db", "api", "web"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
	if _, err := build(t, "a->b", "b->a").TopoOrder(); err == nil {
		t.Error("cycle not reported")
	}
}

func TestOutputs(t *testing.T) {
	g := New()
	g.AddVertex("networks.default", "network", map[string]any{"ip": "192.168.0.1/24"})
	g.AddVertex("services.db", "service", map[string]any{"payload": "db"})
	g.AddVertex("services.web[0]", "service", map[string]any{"index": 0})
	g.AddVertex("resources.files", "resource", nil)
	pos := source.Pos{File: "app.yaml", Line: 30, Col: 70}
	for _, e := range []Edge{
		{From: "services.db", To: "networks.default", Kind: Network, Pos: source.Pos{File: "app.yaml", Line: 20, Col: 14}},
		{From: "services.web[0]", To: "networks.default", Kind: Network},
		{From: "services.web[0]", To: "services.db", Kind: Reference, Reason: `${services.db.network_node.ip}`, Pos: pos},
		{From: "services.web[0]", To: "services.db", Kind: DependsOn},
		{From: "resources.files", To: "services.db", Kind: Dependency, Reason: "store"},
	} {
		if err := g.AddEdge(e); err != nil {
			t.Fatal(err)
		}
	}
	for name, write := range map[string]func(*bytes.Buffer) error{
		"graph.dot":  func(b *bytes.Buffer) error { return g.WriteDOT(b) },
		"graph.json": func(b *bytes.Buffer) error { return g.WriteJSON(b) },
		"graph.mmd":  func(b *bytes.Buffer) error { return g.WriteMermaid(b) },
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := write(&b); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", name), b.Bytes())
		})
	}
}

package graph

import (
	"bytes"
	"strings"
	"testing"
)

func TestStatusInOutput(t *testing.T) {
	g := New()
	g.AddVertex("resources.a", "resource", map[string]any{StatusAttr: "Active"})
	g.AddVertex("resources.b", "resource", map[string]any{StatusAttr: "Pending"})
	if err := g.AddEdge(Edge{From: "resources.b", To: "resources.a", Kind: Recorded}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		write func(*bytes.Buffer) error
		want  []string
	}{
		{"dot", func(b *bytes.Buffer) error { return g.WriteDOT(b) }, []string{
			`"resources.a" [label="resources.a\n(Active)", shape=component, color=darkgreen];`,
			`"resources.b" -> "resources.a" [label="recorded"];`}},
		{"mermaid", func(b *bytes.Buffer) error { return g.WriteMermaid(b) }, []string{
			`n1["resources.b (Pending)"]`, `n1 -->|"recorded"| n0`}},
		{"json", func(b *bytes.Buffer) error { return g.WriteJSON(b) }, []string{`"status": "Active"`, `"kind": "recorded"`}},
	} {
		var b bytes.Buffer
		if err := tc.write(&b); err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s lacks %s:\n%s", tc.name, w, b.String())
			}
		}
	}
}

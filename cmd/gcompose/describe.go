package main

import (
	"fmt"
	"sort"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/descriptor"
	"github.com/gcompose/gcompose/core/graph"
	"github.com/gcompose/gcompose/core/lower"
	"github.com/gcompose/gcompose/core/project"
)

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check descriptors: exit 0 with a summary, or 1 with every problem as file:line:col: message",
		ArgsUsage: "[FILE|PACKAGE.zip ...]",
		// The state flags are accepted and unused, as by every command that reads a descriptor, so that
		// one set of flags (an alias, a CI variable) works for all of them.
		Flags: append(append(descriptorFlags(), imageFlags()...), stateFlags()...),
		Action: func(c *cli.Context) error {
			p, err := loadProject(c)
			if err != nil {
				return err
			}
			g, err := withImplicit(p, lowerer(c))
			if err != nil {
				return withCode(exitError, err)
			}
			fmt.Fprintf(c.App.Writer, "%s: valid: %s\n", p.App.Name, validSummary(p, g))
			return nil
		},
	}
}

// validSummary counts what gcompose graph draws: the descriptor's services,
// networks and resources, the resources the deploy adds (implicit: a Golem
// app's payments and proxies), and every edge between them. It counted
// only the descriptor's edges: validate said 3 edges where graph drew 7.
func validSummary(p *project.Project, g *graph.Graph) string {
	implicit := 0
	for _, v := range g.Vertices() {
		if b, _ := v.Attrs[graph.ImplicitAttr].(bool); b {
			implicit++
		}
	}
	r := p.Resolved
	s := countOf(r.Services, "service") + ", " + countOf(r.Networks, "network")
	if r.Resources > 0 {
		s += ", " + countOf(r.Resources, "resource")
	}
	if implicit > 0 {
		s += ", " + countOf(implicit, "implicit resource")
	}
	return s + ", " + countOf(g.EdgeCount(), "edge")
}

func countOf(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func configCommand() *cli.Command {
	return &cli.Command{
		Name:      "config",
		Usage:     "print the merged, normalized descriptor (one canonical form whatever dialect or shorthand was used)",
		ArgsUsage: "[FILE|PACKAGE.zip ...]",
		Flags: append(append(append(descriptorFlags(), imageFlags()...), stateFlags()...),
			&cli.BoolFlag{Name: "json", Usage: "print JSON instead of YAML"}),
		Action: func(c *cli.Context) error {
			p, err := loadProject(c)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				return printJSON(c.App.Writer, p.App.Tree())
			}
			b, err := descriptor.Canonical(p.App)
			if err != nil {
				return err
			}
			_, err = c.App.Writer.Write(b)
			return err
		},
	}
}

func graphCommand() *cli.Command {
	return &cli.Command{
		Name:      "graph",
		Usage:     "print the dependency graph, every edge labelled with why it exists",
		ArgsUsage: "[FILE|PACKAGE.zip ...]",
		Flags:     append(append(append(descriptorFlags(), &cli.StringFlag{Name: "format", Value: "dot", Usage: "`FORMAT`: dot, json or mermaid"}), deployedGraphFlags()...), imageFlags()...),
		Action: func(c *cli.Context) error {
			var g *graph.Graph
			if c.Bool("deployed") {
				dg, err := deployedGraph(c)
				if err != nil {
					return err
				}
				g = dg
			} else {
				p, err := loadProject(c)
				if err != nil {
					return err
				}
				if g, err = withImplicit(p, lowerer(c)); err != nil {
					return withCode(exitError, err)
				}
			}
			switch c.String("format") {
			case "dot":
				return g.WriteDOT(c.App.Writer)
			case "json":
				return g.WriteJSON(c.App.Writer)
			case "mermaid":
				return g.WriteMermaid(c.App.Writer)
			default:
				return withCode(exitUsage, fmt.Errorf("--format %q: want dot, json or mermaid", c.String("format")))
			}
		},
	}
}

// withImplicit is the descriptor's graph plus the resources a deploy adds
// that the descriptor does not name (a Golem app's payments, the local
// proxies of its services), marked implicit, with their dependencies: the
// graph deploy really walks.
func withImplicit(p *project.Project, l lower.Lowering) (*graph.Graph, error) {
	want, err := l.Resources(p.Resolved)
	if err != nil {
		return nil, err
	}
	dg := p.Resolved.Graph
	g := graph.New()
	for _, v := range dg.Vertices() {
		g.AddVertex(v.ID, v.Kind, v.Attrs)
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !g.HasVertex(n) {
			g.AddVertex(n, "resource", map[string]any{graph.ImplicitAttr: true, "type": want[n].Type})
		}
	}
	for _, e := range dg.Edges() {
		if err := g.AddEdge(e); err != nil {
			return nil, err
		}
	}
	for _, n := range names {
		for _, d := range want[n].DependsOn {
			if !g.HasVertex(d) || len(g.EdgesBetween(n, d)) > 0 {
				continue
			}
			if err := g.AddEdge(graph.Edge{From: n, To: d, Kind: graph.Implicit, Pos: want[n].Pos}); err != nil {
				return nil, err
			}
		}
	}
	return g, nil
}

package main

import (
	"encoding/json"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/descriptor"
	"github.com/gcompose/gcompose/core/graph"
)

func validateCommand() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check descriptors: exit 0 with a summary, or 1 with every problem as file:line:col: message",
		ArgsUsage: "[FILE|PACKAGE.zip ...]",
		Flags:     descriptorFlags(),
		Action: func(c *cli.Context) error {
			p, err := loadProject(c)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "%s: valid: %s\n", p.app.Name, p.resolved.Summary())
			return nil
		},
	}
}

func configCommand() *cli.Command {
	return &cli.Command{
		Name:      "config",
		Usage:     "print the merged, normalized descriptor (one canonical form whatever dialect or shorthand was used)",
		ArgsUsage: "[FILE|PACKAGE.zip ...]",
		Flags:     append(descriptorFlags(), &cli.BoolFlag{Name: "json", Usage: "print JSON instead of YAML"}),
		Action: func(c *cli.Context) error {
			p, err := loadProject(c)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				b, err := json.MarshalIndent(p.app.Tree(), "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(c.App.Writer, string(b))
				return nil
			}
			b, err := descriptor.Canonical(p.app)
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
		Flags:     append(append(descriptorFlags(), &cli.StringFlag{Name: "format", Value: "dot", Usage: "dot, json or mermaid"}), deployedGraphFlags()...),
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
				g = p.resolved.Graph
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

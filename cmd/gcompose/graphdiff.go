package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/diff"
	"github.com/gcompose/gcompose/core/graph"
	"github.com/gcompose/gcompose/core/project"
)

// deployedGraphFlags are added to graph: --deployed reads the state.
func deployedGraphFlags() []cli.Flag {
	return append([]cli.Flag{&cli.BoolFlag{Name: "deployed", Usage: "graph what the state records (each resource's status, its recorded dependencies) instead of the descriptor"}},
		stateFlags()...)
}

// deployedGraph builds the graph of an application's persisted state.
func deployedGraph(c *cli.Context) (*graph.Graph, error) {
	name, doc, err := loadAppState(c)
	if err != nil {
		return nil, err
	}
	if len(doc.Resources) == 0 {
		return nil, withCode(exitError, fmt.Errorf("nothing deployed for %s in %s", name, c.String("state")))
	}
	return stateGraph(doc)
}

func stateGraph(doc *project.Document) (*graph.Graph, error) {
	g := graph.New()
	for _, n := range doc.Names() {
		r := doc.Resources[n]
		attrs := map[string]any{graph.StatusAttr: string(r.Status), "type": r.Type}
		if r.Pending != nil {
			attrs["pending"] = string(r.Pending.Kind)
		}
		g.AddVertex(n, "resource", attrs)
	}
	for _, n := range doc.Names() {
		for _, d := range doc.Resources[n].Dependencies {
			if !g.HasVertex(d) {
				// A dependency no longer in the state: show it, without status.
				g.AddVertex(d, "resource", map[string]any{graph.StatusAttr: "absent"})
			}
			if err := g.AddEdge(graph.Edge{From: n, To: d, Kind: graph.Recorded}); err != nil {
				return nil, fmt.Errorf("state of %s: %w", doc.App, err)
			}
		}
	}
	return g, nil
}

func diffCommand() *cli.Command {
	return &cli.Command{
		Name:  "diff",
		Usage: "compare two snapshots of an application resource by resource: two states, a state and a descriptor, two environments",
		Description: `A snapshot is one of:
   state:LOCATION[#APP]   a state backend (a directory or file://DIR, as --state); APP defaults to --app or the descriptor's name
   file:PATH.json         one state document file (e.g. .gcompose/state/shop.json; its journal next to it is replayed)
   descriptor:FILE        what a descriptor (-f files merge in) asks for; configs may still hold ${...} references
   Without a prefix: *.yaml, *.yml, *.zip are descriptors, *.json state files, anything else a state location.
   Defaults: --from is the state (--state, --app), --to is the descriptor (-f or positional files).

   Examples:
     gcompose diff -f app.yaml                                        state vs descriptor
     gcompose diff --from state:ci/staging#shop --to state:ci/prod#shop  two environments
     gcompose diff --from old/shop.json --to .gcompose/state/shop.json   two state files`,
		ArgsUsage: "[FILE ...]",
		Flags: append(append(descriptorFlags(), stateFlags()...),
			&cli.StringFlag{Name: "from", Usage: "the old snapshot (default: the state)"},
			&cli.StringFlag{Name: "to", Usage: "the new snapshot (default: the descriptor)"},
			&cli.BoolFlag{Name: "status", Usage: "also compare status (two states only)"},
			&cli.BoolFlag{Name: "outputs", Usage: "also compare the adapters' reported state, i.e. outputs (two states only)"},
			&cli.BoolFlag{Name: "identity", Usage: "also compare identifying attributes (two states only; differ between environments by nature)"},
			&cli.BoolFlag{Name: "all", Usage: "--status --outputs --identity"},
			&cli.BoolFlag{Name: "json", Usage: "print the differences as JSON"},
			&cli.BoolFlag{Name: "exit-code", Usage: "exit 2 when the snapshots differ, 0 when they do not"},
		),
		Action: func(c *cli.Context) error {
			from := c.String("from")
			if from == "" {
				u, err := stateURL(c)
				if err != nil {
					return err
				}
				from = "state:" + u
			}
			to := c.String("to")
			if to == "" {
				to = "descriptor:"
			}
			a, err := loadSnapshot(c, from)
			if err != nil {
				return err
			}
			b, err := loadSnapshot(c, to)
			if err != nil {
				return err
			}
			// A descriptor's ${...} references read the state's outputs.
			if a.Kind == "descriptor" && b.Kind == "state" {
				if a, err = diff.ResolveWith(a, b); err != nil {
					return withCode(exitError, err)
				}
			} else if b.Kind == "descriptor" && a.Kind == "state" {
				if b, err = diff.ResolveWith(b, a); err != nil {
					return withCode(exitError, err)
				}
			}
			all := c.Bool("all")
			res := diff.Compare(a, b, diff.Options{Status: all || c.Bool("status"), Outputs: all || c.Bool("outputs"), Identity: all || c.Bool("identity")})
			if c.Bool("json") {
				if err := printJSON(c.App.Writer, res); err != nil {
					return err
				}
			} else if err := res.Render(c.App.Writer); err != nil {
				return err
			}
			if c.Bool("exit-code") && !res.Empty() {
				return withCode(exitChanges, nil)
			}
			return nil
		},
	}
}

// loadSnapshot reads one side of a diff (see diffCommand's description).
func loadSnapshot(c *cli.Context, spec string) (diff.Snapshot, error) {
	kind, rest, ok := strings.Cut(spec, ":")
	if !ok || strings.Contains(spec, "://") && !strings.HasPrefix(spec, "state:") {
		kind, rest = "", spec
	}
	switch kind {
	case "state", "file", "descriptor", "desc":
	default:
		kind, rest = "", spec
	}
	if kind == "" {
		switch strings.ToLower(filepath.Ext(rest)) {
		case ".yaml", ".yml", ".zip":
			kind = "descriptor"
		case ".json":
			kind = "file"
		default:
			kind = "state"
		}
	}
	switch kind {
	case "descriptor", "desc":
		var p *project.Project
		var err error
		if rest != "" {
			p, err = loadFiles(c, []string{rest})
		} else {
			p, err = loadProject(c)
		}
		if err != nil {
			return diff.Snapshot{}, err
		}
		want, err := lowerer(c).Resources(p.Resolved)
		if err != nil {
			return diff.Snapshot{}, withCode(exitError, err)
		}
		label := "descriptor:" + strings.Join(p.App.Files, ",")
		return diff.FromDesired(label, want), nil
	case "file":
		doc, err := readStateFile(c, rest)
		if err == nil {
			doc, err = unsealDoc(c, doc.App, doc)
		}
		if err != nil {
			return diff.Snapshot{}, withCode(exitError, err)
		}
		return diff.FromState("file:"+rest, doc), nil
	default:
		loc, app, _ := strings.Cut(rest, "#")
		if app == "" {
			name, _, err := appName(c, false)
			if err != nil {
				return diff.Snapshot{}, err
			}
			app = name
		}
		// Reading must not create: the file backend makes its directory.
		if dir := strings.TrimPrefix(loc, "file://"); !strings.Contains(dir, "://") {
			if _, err := os.Stat(dir); err != nil {
				return diff.Snapshot{}, withCode(exitError, fmt.Errorf("state %s: %w", loc, err))
			}
		}
		st, err := openStateURL(c, loc)
		if err != nil {
			return diff.Snapshot{}, err
		}
		defer st.Close()
		doc, err := st.Load(c.Context, app)
		if err != nil {
			return diff.Snapshot{}, withCode(exitError, fmt.Errorf("state %s of %s: %w", loc, app, err))
		}
		// With the state key, secrets compare by value (and print masked);
		// without it, their envelopes compare as they are.
		if doc, err = unsealDoc(c, app, doc); err != nil {
			return diff.Snapshot{}, withCode(exitError, err)
		}
		return diff.FromState("state:"+loc+"#"+app, doc), nil
	}
}

// readStateFile reads <dir>/<app>.json through the file backend (so the
// journal beside it is replayed), or, failing that, as a bare document.
func readStateFile(c *cli.Context, path string) (*project.Document, error) {
	dir, base := filepath.Split(path)
	app := strings.TrimSuffix(base, filepath.Ext(base))
	if dir == "" {
		dir = "."
	}
	if _, err := os.Stat(path); err != nil {
		// A state not compacted yet may be only a journal.
		if _, jerr := os.Stat(filepath.Join(dir, app+".journal")); jerr != nil {
			return nil, fmt.Errorf("state file: %w", err)
		}
	}
	if doc, err := project.ReadStateFile(c.Context, dir, app); err == nil && doc.App == app && len(doc.Resources) > 0 {
		return doc, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	var doc project.Document
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	return &doc, nil
}

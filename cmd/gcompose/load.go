package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/descriptor"
	"github.com/gcompose/gcompose/core/resolve"
	"github.com/gcompose/gcompose/core/source"
)

// defaultFiles are looked for when no descriptor is named.
var defaultFiles = []string{"gcompose.yaml", "gcompose.yml"}

func descriptorFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "file", Aliases: []string{"f"}, Usage: "descriptor file or .zip package (repeat to merge in order; positional arguments work too)"},
		&cli.BoolFlag{Name: "ignore-unknown", Usage: "report unknown keys as warnings instead of errors"},
		&cli.StringSliceFlag{Name: "var", Usage: "set ${var.NAME}: --var NAME=VALUE (repeatable)"},
		&cli.StringSliceFlag{Name: "var-file", Usage: "read ${var.*} values from a YAML or KEY=VALUE file (repeatable)"},
	}
}

// descriptorFiles returns -f files followed by positional ones, in order.
func descriptorFiles(c *cli.Context) ([]string, error) {
	files := append(c.StringSlice("file"), c.Args().Slice()...)
	if len(files) > 0 {
		return files, nil
	}
	for _, f := range defaultFiles {
		if _, err := os.Stat(f); err == nil {
			return []string{f}, nil
		}
	}
	return nil, withCode(exitUsage, fmt.Errorf("no descriptor given: name one (gcompose %s app.yaml, or -f app.yaml) or create %s", c.Command.Name, defaultFiles[0]))
}

// project is a loaded, validated and resolved descriptor.
type project struct {
	app      *descriptor.App
	resolved *resolve.Resolved
}

// loadProject loads, validates and resolves the descriptors named on the
// command line, printing every diagnostic. It fails when any is an error.
func loadProject(c *cli.Context) (*project, error) {
	files, err := descriptorFiles(c)
	if err != nil {
		return nil, err
	}
	return loadFiles(c, files)
}

func loadFiles(c *cli.Context, files []string) (*project, error) {
	if len(files) == 0 {
		for _, f := range defaultFiles {
			if _, err := os.Stat(f); err == nil {
				files = []string{f}
				break
			}
		}
	}
	if len(files) == 0 {
		return nil, withCode(exitUsage, fmt.Errorf("which application? pass --app NAME or -f DESCRIPTOR"))
	}
	app, diags := descriptor.Load(c.Context, descriptor.Options{IgnoreUnknown: c.Bool("ignore-unknown")}, files...)
	if diags.HasErrors() || app == nil {
		return nil, reportDiagnostics(c.App.ErrWriter, diags)
	}
	vars, err := loadVars(c)
	if err != nil {
		return nil, withCode(exitError, err)
	}
	res, rdiags := resolve.Resolve(app, resolve.Options{Vars: vars})
	registerSecrets(c, res.Secrets)
	all := append(append(source.Diagnostics{}, diags...), rdiags...)
	if all.HasErrors() {
		return nil, reportDiagnostics(c.App.ErrWriter, all)
	}
	printWarnings(c.App.ErrWriter, all)
	return &project{app: app, resolved: res}, nil
}

func printWarnings(w io.Writer, ds source.Diagnostics) {
	ws := ds.Warnings()
	ws.Sort()
	for _, d := range ws {
		fmt.Fprintln(w, d.String())
	}
}

// reportDiagnostics prints every problem as file:line:col: message and
// returns the error that makes the command exit 1.
func reportDiagnostics(w io.Writer, ds source.Diagnostics) error {
	ds.Sort()
	for _, d := range ds {
		fmt.Fprintln(w, d.String())
	}
	n := len(ds.Errors())
	return withCode(exitError, fmt.Errorf("%d problem(s) found", n))
}

// loadVars merges --var-file files (in order) and then --var flags.
func loadVars(c *cli.Context) (map[string]string, error) {
	vars := map[string]string{}
	for _, f := range c.StringSlice("var-file") {
		if err := readVarFile(f, vars); err != nil {
			return nil, err
		}
	}
	for _, kv := range c.StringSlice("var") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--var %q: want NAME=VALUE", kv)
		}
		vars[k] = v
	}
	return vars, nil
}

// readVarFile reads KEY=VALUE lines (# comments) or a flat YAML mapping.
func readVarFile(path string, into map[string]string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("--var-file: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") || t == "---" {
			continue
		}
		sep := "="
		if !strings.Contains(t, "=") {
			sep = ":"
		}
		k, v, ok := strings.Cut(t, sep)
		if !ok {
			return fmt.Errorf("%s:%d: want NAME=VALUE or NAME: VALUE", path, line)
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
			v = v[1 : len(v)-1]
		}
		into[strings.TrimSpace(k)] = v
	}
	return sc.Err()
}

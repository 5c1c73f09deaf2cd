package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/project"
	"github.com/gcompose/gcompose/core/source"
)

// defaultFiles are looked for when no descriptor is named.
var defaultFiles = []string{"gcompose.yaml", "gcompose.yml"}

// fileFlag is -f/--file: a descriptor file, on every command and before
// the command (gcompose -f app.yaml logs -f, as in docker compose).
func fileFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "file", Aliases: []string{"f"}, Usage: "descriptor `FILE` or .zip package (repeat to merge in order; positional arguments work too)"}
}

// fileArgs are the -f files given before the command, then the command's
// own, in order.
func fileArgs(c *cli.Context) []string {
	var files []string
	lin := c.Lineage()
	for i := len(lin) - 1; i >= 0; i-- {
		x := lin[i]
		if x.Command != nil && definesFlag(x.Command, "file") {
			files = append(files, x.StringSlice("file")...)
		}
	}
	return files
}

func definesFlag(cmd *cli.Command, name string) bool {
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

func descriptorFlags() []cli.Flag {
	return []cli.Flag{
		fileFlag(),
		&cli.BoolFlag{Name: "ignore-unknown", Usage: "report unknown keys as warnings instead of errors"},
		&cli.StringSliceFlag{Name: "var", Usage: "set ${var.NAME}: `NAME=VALUE` (repeatable; $GCOMPOSE_VAR_NAME sets it too, below --var-file and --var)"},
		&cli.StringSliceFlag{Name: "allow-host-path", Usage: "let plugs mount this host `PATH` (or below it) although it is outside the project (repeatable; or allow_host_paths in .gcompose/config.yaml)"},
		&cli.StringSliceFlag{Name: "var-file", Usage: "read ${var.*} values from a YAML or KEY=VALUE `FILE` (repeatable)"},
	}
}

// descriptorFiles returns -f files followed by positional ones, in order.
// On the commands that take service names (targetingCommand), only the
// positional arguments that name files are descriptors.
func descriptorFiles(c *cli.Context) ([]string, error) {
	pos, _ := splitPositional(c)
	files := append(fileArgs(c), pos...)
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

// loadProject loads, validates and resolves the descriptors named on the
// command line, printing every diagnostic. It fails when any is an error.
func loadProject(c *cli.Context) (*project.Project, error) {
	files, err := descriptorFiles(c)
	if err != nil {
		return nil, err
	}
	return loadFiles(c, files)
}

func loadFiles(c *cli.Context, files []string) (*project.Project, error) {
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
	vars, err := loadVars(c)
	if err != nil {
		return nil, withCode(exitError, err)
	}
	pol, err := plugPolicy(c)
	if err != nil {
		return nil, withCode(exitError, err)
	}
	p, diags := project.Load(c.Context, project.LoadOptions{Files: files, IgnoreUnknown: c.Bool("ignore-unknown"),
		Vars: vars, Plugs: pol, Lowering: lowerer(c), Redactor: redactor(c)})
	if diags.HasErrors() || p == nil {
		return nil, reportDiagnostics(c.App.ErrWriter, diags)
	}
	printWarnings(c.App.ErrWriter, diags)
	return p, nil
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

// varEnvPrefix names an environment variable that sets ${var.NAME}, as
// Terraform's TF_VAR_NAME: GCOMPOSE_VAR_region=eu.
const varEnvPrefix = "GCOMPOSE_VAR_"

// loadVars merges GCOMPOSE_VAR_* variables, then --var-file files (in
// order), then --var flags: the more explicit wins, as in Terraform.
func loadVars(c *cli.Context) (map[string]string, error) {
	vars := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, varEnvPrefix) && len(k) > len(varEnvPrefix) {
			vars[strings.TrimPrefix(k, varEnvPrefix)] = v
		}
	}
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

// targetingCommand: plan, deploy and destroy take service and resource
// names as well as descriptor files (gcompose deploy web db).
func targetingCommand(c *cli.Context) bool {
	if c.Command == nil {
		return false
	}
	switch c.Command.Name {
	case "plan", "deploy", "destroy":
		return true
	}
	return false
}

// splitPositional tells descriptor files from names among the positional
// arguments: on targeting commands an argument is a file when it ends in
// .yaml, .yml, .zip or .plan or exists on disk, and a name otherwise.
// Elsewhere every positional argument is a file.
func splitPositional(c *cli.Context) (files, names []string) {
	if !targetingCommand(c) {
		return c.Args().Slice(), nil
	}
	for _, a := range c.Args().Slice() {
		if looksLikeDescriptor(a) || isSavedPlanArg(a) {
			files = append(files, a)
		} else {
			names = append(names, a)
		}
	}
	return files, names
}

// targetsOf is --target and the names given as positional arguments.
func targetsOf(c *cli.Context) []string {
	_, names := splitPositional(c)
	return append(append([]string(nil), c.StringSlice("target")...), names...)
}

func targetFlags(replace bool) []cli.Flag {
	fs := []cli.Flag{&cli.StringSliceFlag{Name: "target", Usage: "limit the run to `ADDRESS` (services.web, resources.db, or a bare name: web) and what it needs; destroy: and what depends on it (repeatable; names given as arguments do the same)"}}
	if replace {
		fs = append(fs, &cli.StringSliceFlag{Name: "replace", Usage: "rebuild `ADDRESS` although nothing asks for it: remove it and create it anew (repeatable)"})
	}
	return fs
}

// Package project is the one way from descriptor files to the engine, as
// Compose's "project" is: Load reads, validates and resolves descriptors
// into a Project; Open assembles what runs it — the adapter client, the
// plugs, the state store — with the secret guards in place, and Run plans
// and applies through core/engine. Every caller of the engine (the CLI's
// plan, deploy, destroy and refresh, logs --follow, a reconciler) goes
// through here, so none of them can forget a guard.
//
// It knows no Golem: what services and networks lower to is the
// lower.Lowering its caller passes in.
package project

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gcompose/gcompose/core/descriptor"
	"github.com/gcompose/gcompose/core/lower"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/plugpath"
	"github.com/gcompose/gcompose/core/resolve"
	"github.com/gcompose/gcompose/core/secret"
	"github.com/gcompose/gcompose/core/source"
)

// LoadOptions are Load's inputs from outside the descriptor files.
type LoadOptions struct {
	// Files are the descriptors (YAML files or ZIP packages), merged in order.
	Files []string
	// IgnoreUnknown reports unknown keys as warnings instead of errors.
	IgnoreUnknown bool
	// Vars are the values of ${var.NAME}.
	Vars map[string]string
	// Plugs is where plugs may point on the host.
	Plugs plugpath.Policy
	// Lowering says which fields of services and networks are their
	// adapters' outputs, and later what the application lowers to.
	Lowering lower.Lowering
	// Redactor learns the values of the descriptor's ${secret.*}, so that
	// nothing printed afterwards shows them. Nil: a new one.
	Redactor *secret.Redactor
}

// Project is a loaded, validated and resolved application.
type Project struct {
	App      *descriptor.App
	Resolved *resolve.Resolved
	// PlugPaths are the plugs' host paths: absolute, symbolic links
	// resolved, checked against the policy (core/plugpath).
	PlugPaths map[string]string
	// Lowering is the one it was loaded with.
	Lowering lower.Lowering
}

// Load reads, validates and resolves the descriptors. It returns every
// diagnostic, warnings included; the project is nil when any is an error.
func Load(ctx context.Context, opts LoadOptions) (*Project, source.Diagnostics) {
	if opts.Lowering == nil {
		opts.Lowering = lower.Generic{}
	}
	app, diags := descriptor.Load(ctx, descriptor.Options{IgnoreUnknown: opts.IgnoreUnknown}, opts.Files...)
	if diags.HasErrors() || app == nil {
		return nil, diags
	}
	res, rdiags := resolve.Resolve(app, resolve.Options{Vars: opts.Vars, Outputs: opts.Lowering.Outputs(), Implicit: lower.ImplicitOf(opts.Lowering)})
	if opts.Redactor != nil && res != nil {
		for _, v := range res.Secrets {
			opts.Redactor.Add(v)
		}
	}
	plugs, pdiags := plugpath.Resolve(app, opts.Plugs)
	all := append(append(append(source.Diagnostics{}, diags...), rdiags...), pdiags...)
	if all.HasErrors() {
		return nil, all
	}
	return &Project{App: app, Resolved: res, PlugPaths: plugs, Lowering: opts.Lowering}, all
}

// Name is the application's name (meta.name).
func (p *Project) Name() string { return p.App.Name }

// Desired is what the application lowers to: the resources the engine
// converges, by address.
func (p *Project) Desired() (map[string]*plan.Resource, error) {
	want, err := p.Lowering.Resources(p.Resolved)
	if err != nil {
		return nil, fmt.Errorf("lowering %s: %w", p.App.Name, err)
	}
	return want, nil
}

// Outputs is the descriptor's outputs: section, unevaluated.
func (p *Project) Outputs() map[string]any { return p.Resolved.Outputs }

// SecretNames are the names of the descriptor's ${secret.*}, sorted.
func (p *Project) SecretNames() []string {
	names := make([]string, 0, len(p.Resolved.Secrets))
	for n := range p.Resolved.Secrets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// EnsurePlugDirs creates the plug directories that do not exist yet inside
// the project, as Docker Compose creates a missing bind-mount source, and
// reports each through created. A missing directory outside the project is
// not ours to create: that is one plain error instead of the Engine's
// bind-mount message repeated for every resource.
func (p *Project) EnsurePlugDirs(created func(msg string)) error {
	names := make([]string, 0, len(p.App.Plugs))
	for name := range p.App.Plugs {
		names = append(names, name)
	}
	sort.Strings(names)
	root := p.dir()
	for _, name := range names {
		pl := p.App.Plugs[name]
		path := p.PlugPaths[name]
		if path == "" {
			continue // refused when the descriptor was loaded
		}
		fi, err := os.Stat(path)
		switch {
		case err == nil && fi.IsDir():
			continue
		case err == nil:
			return fmt.Errorf("%s: plug %q: %s is not a directory", pl.Pos, name, displayPath(path))
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("%s: plug %q: %w", pl.Pos, name, err)
		}
		if !inside(root, path) {
			return fmt.Errorf("%s: plug %q: directory %s does not exist (gcompose creates missing plug directories inside the project, %s, only)", pl.Pos, name, path, root)
		}
		if err := os.MkdirAll(path, 0o755); err != nil {
			return fmt.Errorf("%s: plug %q: creating %s: %w", pl.Pos, name, displayPath(path), err)
		}
		if created != nil {
			created(fmt.Sprintf("created the plug directory %s (plug %q)", displayPath(path), name))
		}
	}
	return nil
}

// dir is what relative plug paths are relative to: the directory of the
// first descriptor (or of the package holding it), symbolic links resolved.
func (p *Project) dir() string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	dir := plugpath.BaseDir(p.App, wd)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return dir
}

// inside reports whether path is root or below it.
func inside(root, path string) bool {
	if root == "" {
		return false
	}
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// displayPath is path relative to the working directory when it is below
// it, as the user typed it.
func displayPath(path string) string {
	wd, err := os.Getwd()
	if err != nil || !inside(wd, path) {
		return path
	}
	rel, _ := filepath.Rel(wd, path)
	return rel
}

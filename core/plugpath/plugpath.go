// Package plugpath decides where on the host a descriptor's plugs may
// point. A plug is a host path bind-mounted into adapter containers, which
// run as root: a descriptor (or a downloaded .zip package) that could plug
// "/" or "../../etc" would let an adapter write anywhere on the host. So a
// plug path must lie inside the project — the directory of the first
// descriptor (for a package, the directory holding the .zip) or the working
// directory — after symbolic links are resolved, unless the user allows a
// host path explicitly; a package never gets that allowance. gcompose's own
// directory (.gcompose: the state, its lock, the cache) is never pluggable,
// and a plug path is not a template.
package plugpath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/gcompose/gcompose/core/descriptor"
	"github.com/gcompose/gcompose/core/expr"
	"github.com/gcompose/gcompose/core/source"
	"github.com/gcompose/gcompose/internal/jsonpointer"
)

// Policy says where plug paths may point.
type Policy struct {
	// WorkDir is the working directory (absolute).
	WorkDir string
	// Allowed are host paths the user allowed explicitly (--allow-host-path,
	// allow_host_paths in .gcompose/config.yaml): a plug may be one of them
	// or lie below one. Never for a plug whose path a package defines.
	Allowed []string
}

// Resolve returns the host path of each plug, absolute and with symbolic
// links resolved (what the Engine is asked to mount), and an error at the
// plug's path for each that may not be used.
func Resolve(app *descriptor.App, pol Policy) (map[string]string, source.Diagnostics) {
	var ds source.Diagnostics
	out := map[string]string{}
	base := baseDir(app, pol.WorkDir)
	roots := compact([]string{realPath(base), realPath(pol.WorkDir)})
	allowed := make([]string, 0, len(pol.Allowed))
	for _, a := range pol.Allowed {
		if !filepath.IsAbs(a) {
			a = filepath.Join(pol.WorkDir, a)
		}
		allowed = append(allowed, realPath(a))
	}
	names := make([]string, 0, len(app.Plugs))
	for n := range app.Plugs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		p := app.Plugs[name]
		at := app.Pos("/plugs/" + jsonpointer.Escape(name) + "/path")
		if !at.IsValid() {
			at = p.Pos
		}
		raw, err := literal(p.Path)
		if err != nil {
			ds.Errorf(at, "plug %s: %v", name, err)
			continue
		}
		if raw == "" {
			continue // reported by the descriptor's own checks
		}
		path := raw
		if !filepath.IsAbs(path) {
			path = filepath.Join(base, path)
		}
		real := realPath(path)
		fromPackage := inPackage(at.File)
		switch {
		case anyWithin(roots, real):
		case fromPackage:
			ds.Errorf(at, "plug %s: %s is %s, outside the project (%s): a package can never plug a path outside its project; to mount a host path, define the plug in a descriptor of your own (-f yours.yaml) and allow it there",
				name, raw, real, strings.Join(roots, " or "))
			continue
		case anyWithin(allowed, real):
		default:
			ds.Errorf(at, "plug %s: %s is %s, outside the project (%s): adapters run as root and could write anywhere it points. Move it into the project, or allow this host path explicitly: --allow-host-path %s, or allow_host_paths: [%s] in .gcompose/config.yaml",
				name, raw, real, strings.Join(roots, " or "), real, real)
			continue
		}
		if own := ownDir(roots, real); own != "" {
			ds.Errorf(at, "plug %s: %s is or contains gcompose's own directory %s (the state, its lock, the state key): plug a directory beside it", name, raw, own)
			continue
		}
		out[name] = real
	}
	return out, ds
}

// ownDir is gcompose's own directory (ROOT/.gcompose) that path is in or
// contains, if any.
func ownDir(roots []string, path string) string {
	for _, root := range roots {
		if own := filepath.Join(root, ".gcompose"); within(own, path) || within(path, own) {
			return own
		}
	}
	return ""
}

// literal is a plug path as written, refusing templates: nothing expands
// them here, and a ${secret.*} would end up in a mount, the state and
// docker inspect in clear.
func literal(path string) (string, error) {
	t, err := expr.Parse(path)
	if err != nil {
		return "", fmt.Errorf("path %q: %v (a literal \"${\" is written \"$${\")", path, err)
	}
	for _, r := range t.Refs() {
		if len(r.Path) > 0 && r.Path[0].Name == "secret" {
			return "", fmt.Errorf("path %q: %s cannot be used in a plug path: a secret would become a host path, shown in the container's mounts and stored in the state; plug paths are not templates", path, r.Text())
		}
		return "", fmt.Errorf("path %q: %s is not expanded in a plug path: plug paths are not templates", path, r.Text())
	}
	return t.Literal(), nil
}

// baseDir is what relative plug paths are relative to: the first
// descriptor's directory, or, for a package, the directory holding it.
func baseDir(app *descriptor.App, wd string) string {
	if len(app.Files) == 0 {
		return wd
	}
	f := app.Files[0]
	if pkg, ok := packageOf(f); ok {
		f = pkg
	}
	dir := filepath.Dir(f)
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(wd, dir)
	}
	return filepath.Clean(dir)
}

// BaseDir is what relative plug paths of app are relative to (see Resolve).
func BaseDir(app *descriptor.App, wd string) string { return baseDir(app, wd) }

// packageOf returns the .zip a descriptor file name is inside of
// ("dir/app.zip/app.yaml" → "dir/app.zip").
func packageOf(file string) (string, bool) {
	i := strings.Index(strings.ToLower(file), ".zip/")
	if i < 0 {
		return "", false
	}
	return file[:i+4], true
}

func inPackage(file string) bool {
	_, ok := packageOf(file)
	return ok
}

// realPath is path absolute, cleaned, with the symbolic links of its
// longest existing prefix resolved (the rest does not exist yet: nothing
// there can be a link).
func realPath(path string) string {
	path = filepath.Clean(path)
	rest := ""
	for p := path; ; {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(r, rest)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return filepath.Join(p, rest) // unreadable: judged as written
		}
		parent := filepath.Dir(p)
		if parent == p {
			return path
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// within says whether path is dir or below it.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

func anyWithin(dirs []string, path string) bool {
	for _, d := range dirs {
		if within(d, path) {
			return true
		}
	}
	return false
}

// compact drops empty and repeated roots, and the file system's root,
// which confines nothing (gcompose run from /).
func compact(s []string) []string {
	var out []string
	for _, x := range s {
		if x != "" && x != string(filepath.Separator) && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// WorkDir is the working directory, for Policy.
func WorkDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	return wd, nil
}

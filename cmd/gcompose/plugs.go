package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gcompose/gcompose/core/plugpath"
)

// plugHostPath is where a descriptor's plug is on the host: absolute, with
// symbolic links resolved, checked to lie inside the project or a host
// path the user allowed (core/plugpath, when the descriptor was loaded).
func plugHostPath(p *project, name string) string {
	return p.plugPaths[name]
}

// projectDir is what relative plug paths are relative to: the directory of
// the first descriptor (of the package holding it), symbolic links resolved.
func projectDir(p *project) string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	dir := plugpath.BaseDir(p.app, wd)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return dir
}

// ensurePlugDirs creates the plug directories that do not exist yet inside
// the project, as Docker Compose creates a missing bind-mount source, and
// reports each through created. A missing directory outside the project is
// not gcompose's to create: that is one plain error instead of the Engine's
// bind-mount message repeated for every resource.
func ensurePlugDirs(p *project, created func(msg string)) error {
	if p == nil {
		return nil
	}
	names := make([]string, 0, len(p.app.Plugs))
	for name := range p.app.Plugs {
		names = append(names, name)
	}
	sort.Strings(names)
	root := projectDir(p)
	for _, name := range names {
		pl := p.app.Plugs[name]
		path := plugHostPath(p, name)
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
		created(fmt.Sprintf("created the plug directory %s (plug %q)", displayPath(path), name))
	}
	return nil
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

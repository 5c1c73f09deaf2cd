package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The CLI parses flags, calls core/project and renders. What it may not
// import says so: the state is reached through core/project (which locks,
// guards secrets and picks the backend's elector), and of the Golem
// packages only the lowering it registers.
const module = "github.com/gcompose/gcompose/"

// forbidden says why a package may not be imported by the CLI, "" when it
// may.
func forbidden(path string) string {
	switch {
	case path == module+"core/state" || strings.HasPrefix(path, module+"core/state/"):
		return "the state is reached through core/project"
	case path == module+"adapters/golem/lowering":
		return ""
	case strings.HasPrefix(path, module+"adapters/golem/"):
		return "of the Golem packages the CLI imports only the lowering it registers"
	}
	return ""
}

// notYet are files that break the rule today, with what they import; the
// test fails when one no longer needs its exception, so the list only
// shrinks. None does: cost.go renders what core/spend sums.
var notYet = map[string][]string{}

func TestCLIImportsOnlyTheFacade(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	used := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			why := forbidden(path)
			if why == "" {
				continue
			}
			if slices.Contains(notYet[name], path) {
				used[name+" "+path] = true
				continue
			}
			t.Errorf("%s imports %s: %s", fset.Position(imp.Pos()), path, why)
		}
	}
	for name, paths := range notYet {
		if _, err := os.Stat(name); err != nil {
			t.Errorf("notYet names %s, which is gone: remove it from the list", name)
			continue
		}
		for _, p := range paths {
			if !used[name+" "+p] {
				t.Errorf("%s no longer imports %s: remove it from notYet", name, p)
			}
		}
	}
}

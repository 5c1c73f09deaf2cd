package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestGolemSweepListsEveryGatedTest: a test that calls golemSweep is skipped by make test, so the only run
// it gets is make golem-sweep's, which runs the names in the Makefile's GOLEM_SWEEP. A test gated but not
// listed would run nowhere; one listed but not gated would run twice, or not exist.
func TestGolemSweepListsEveryGatedTest(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(moduleRoot(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^GOLEM_SWEEP\s*:=\s*(.+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile has no GOLEM_SWEEP := line")
	}
	listed := strings.Split(strings.TrimSpace(string(m[1])), "|")
	slices.Sort(listed)

	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var gated []string
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if id, ok := c.Fun.(*ast.Ident); ok && id.Name == "golemSweep" {
						gated = append(gated, fn.Name.Name)
						return false
					}
				}
				return true
			})
		}
	}
	slices.Sort(gated)
	gated = slices.Compact(gated)
	if !slices.Equal(listed, gated) {
		t.Fatalf("the Makefile's GOLEM_SWEEP lists %v; the tests that call golemSweep are %v", listed, gated)
	}
}

package descriptor

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/source"
	"github.com/gcompose/gcompose/internal/golden"
)

func newTestLoader(t testing.TB, opts Options) *Loader {
	t.Helper()
	l, err := NewLoader(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// report renders a load result: every diagnostic, then the canonical form.
func report(t *testing.T, app *App, ds source.Diagnostics) []byte {
	t.Helper()
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	if app != nil && !ds.HasErrors() {
		out, err := Canonical(app)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(out)
	}
	return []byte(b.String())
}

// TestCases loads every testdata/cases/<case>/ folder: its *.yaml files in
// name order, as several -f files (an "ignore-unknown" file sets that
// option), and compares every diagnostic (position and message) and the
// canonical output with <case>.golden.
func TestCases(t *testing.T) {
	dirs, err := filepath.Glob("testdata/cases/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var opts Options
			if _, err := os.Stat(filepath.Join(dir, "ignore-unknown")); err == nil {
				opts.IgnoreUnknown = true
			}
			if _, err := os.Stat(filepath.Join(dir, "small-limits")); err == nil {
				opts.Limits = Limits{MaxFileBytes: 4096, MaxAliasNodes: 1000, MaxDepth: 16}
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var srcs []Source
			for _, e := range entries {
				if !strings.HasSuffix(e.Name(), ".yaml") {
					continue
				}
				data, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				srcs = append(srcs, Source{Name: e.Name(), Data: data})
			}
			sort.Slice(srcs, func(i, j int) bool { return srcs[i].Name < srcs[j].Name })
			app, ds := newTestLoader(t, opts).LoadSources(context.Background(), srcs...)
			golden.Check(t, filepath.Join("testdata", "cases", filepath.Base(dir)+".golden"), report(t, app, ds))
		})
	}
}

// TestConformance loads every real-world descriptor from disk: none may have
// an error, the canonical form is golden, and loading the canonical form
// again gives the same canonical form.
func TestConformance(t *testing.T) {
	files, err := filepath.Glob("testdata/conformance/*/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 17 {
		t.Fatalf("found %d conformance files, want at least 17", len(files))
	}
	l := newTestLoader(t, Options{})
	for _, f := range files {
		t.Run(strings.TrimPrefix(f, "testdata/conformance/"), func(t *testing.T) {
			app, ds := l.Load(context.Background(), f)
			if len(ds) > 0 {
				t.Fatalf("diagnostics:\n%v", ds)
			}
			out, err := Canonical(app)
			if err != nil {
				t.Fatal(err)
			}
			rel := strings.TrimSuffix(strings.TrimPrefix(f, "testdata/conformance/"), ".yaml")
			golden.Check(t, filepath.Join("testdata", "golden", "conformance", rel+".canonical.yaml"), out)

			again, ds := l.LoadSources(context.Background(), Source{Name: "canonical.yaml", Data: out})
			if ds.HasErrors() {
				t.Fatalf("canonical form does not load:\n%v", ds)
			}
			out2, _ := Canonical(again)
			if string(out) != string(out2) {
				t.Errorf("canonical form is not stable:\n%s\n---\n%s", out, out2)
			}
		})
	}
}

// TestExamples loads the descriptors in examples/descriptor (what users copy
// from) and keeps their canonical forms golden.
func TestExamples(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "descriptor")
	l := newTestLoader(t, Options{})
	for name, files := range map[string][]string{
		"webapp":            {"webapp.yaml"},
		"webapp-prod":       {"webapp.yaml", "webapp.prod.yaml"},
		"dapp-runner":       {"dapp-runner.yaml"},
		"generic-resources": {"generic-resources.yaml"},
	} {
		t.Run(name, func(t *testing.T) {
			paths := make([]string, len(files))
			for i, f := range files {
				paths[i] = filepath.Join(dir, f)
			}
			app, ds := l.Load(context.Background(), paths...)
			if len(ds) > 0 {
				t.Fatal(ds)
			}
			out, err := Canonical(app)
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "golden", "examples", name+".canonical.yaml"), out)
		})
	}
}

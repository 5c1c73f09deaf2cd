package descriptor

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the loader, alone and as an override of
// a valid descriptor: it must never panic nor run away, and whatever it
// accepts must print a canonical form that loads again to the same form.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/conformance/*/*.yaml")
	cases, _ := filepath.Glob("testdata/cases/*/*.yaml")
	for _, p := range append(seeds, cases...) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	base, err := os.ReadFile("testdata/conformance/gap16/webapp_with_local_proxy.gaom.yaml")
	if err != nil {
		f.Fatal(err)
	}
	l, err := NewLoader(Options{Limits: Limits{MaxFileBytes: 1 << 16, MaxAliasNodes: 10_000}})
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, srcs := range [][]Source{
			{{Name: "fuzz.yaml", Data: data}},
			{{Name: "base.yaml", Data: base}, {Name: "fuzz.yaml", Data: data}},
		} {
			app, ds := l.LoadSources(ctx, srcs...)
			if app == nil || ds.HasErrors() {
				continue
			}
			out, err := Canonical(app)
			if err != nil {
				t.Fatalf("canonical: %v", err)
			}
			again, ds := l.LoadSources(ctx, Source{Name: "canonical.yaml", Data: out})
			if ds.HasErrors() {
				t.Fatalf("canonical form does not load:\n%s\n%v", out, ds)
			}
			out2, err := Canonical(again)
			if err != nil || string(out2) != string(out) {
				t.Fatalf("canonical form not stable:\n%s\n---\n%s", out, out2)
			}
		}
	})
}

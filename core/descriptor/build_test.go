package descriptor

import (
	"archive/zip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildContext: a payload's build: is a folder holding a Dockerfile, read relative to the descriptor
// file that writes it (as Compose reads build:), and a bad one is an error at its file:line:col.
func TestBuildContext(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "app", "counter"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "app", "empty"), 0o755))
	must(os.WriteFile(filepath.Join(root, "app", "counter", "Dockerfile"), []byte("FROM scratch\n"), 0o644))
	must(os.WriteFile(filepath.Join(root, "app", "notes.txt"), []byte("x"), 0o644))
	write := func(payload string) string {
		f := filepath.Join(root, "app", "app.yaml")
		must(os.WriteFile(f, []byte("payloads:\n  counter:\n"+payload+"services:\n  counter: {payload: counter}\n"), 0o644))
		return f
	}

	f := write("    runtime: vm\n    build: ./counter\n")
	app, ds := Load(context.Background(), Options{}, f)
	if ds.HasErrors() {
		t.Fatalf("a good build context: %v", ds)
	}
	want := filepath.Join(root, "app", "counter")
	if p := app.Payloads["counter"]; p.Build != "./counter" || p.BuildDir != want {
		t.Fatalf("build %q dir %q, want ./counter and %s", p.Build, p.BuildDir, want)
	}
	if got := app.Tree()["payloads"].(map[string]any)["counter"].(map[string]any)["build"]; got != want {
		t.Errorf("the canonical payload's build is %v, want the folder %s", got, want)
	}

	for _, tc := range []struct{ name, payload, want string }{
		{"missing", "    runtime: vm\n    build: ./countr\n", "app.yaml:4:12: payload counter: build context ./countr: no such directory"},
		{"no Dockerfile", "    runtime: vm\n    build: empty\n", "app.yaml:4:12: payload counter: build context empty has no Dockerfile"},
		{"a file", "    runtime: vm\n    build: notes.txt\n", "app.yaml:4:12: payload counter: build context notes.txt is a file, not a directory"},
		{"and a hash", "    runtime: vm\n    build: ./counter\n    params: {image_hash: abc}\n", "app.yaml:4:12: payload counter: build: and params.image_hash both name the image"},
		{"not vm", "    runtime: local-http-proxy\n    build: ./counter\n", "app.yaml:4:12: payload counter: build: makes a VM image; runtime \"local-http-proxy\" runs none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ds := Load(context.Background(), Options{}, write(tc.payload))
			if !ds.HasErrors() || !strings.Contains(ds.Error(), tc.want) {
				t.Errorf("diagnostics:\n%v\nwant one containing %q", ds, tc.want)
			}
		})
	}

	t.Run("in a package", func(t *testing.T) {
		pkg := filepath.Join(root, "app.zip")
		f, err := os.Create(pkg)
		must(err)
		zw := zip.NewWriter(f)
		w, err := zw.Create("app.yaml")
		must(err)
		_, err = w.Write([]byte("payloads:\n  counter:\n    runtime: vm\n    build: ./counter\nservices:\n  counter: {payload: counter}\n"))
		must(err)
		must(zw.Close())
		must(f.Close())
		_, ds := Load(context.Background(), Options{}, pkg)
		if want := "a relative build context is read from the descriptor file's folder"; !ds.HasErrors() || !strings.Contains(ds.Error(), want) {
			t.Errorf("diagnostics:\n%v\nwant one containing %q", ds, want)
		}
	})
}

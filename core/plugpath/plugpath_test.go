package plugpath_test

import (
	"archive/zip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/descriptor"
	"github.com/gcompose/gcompose/core/plugpath"
)

const descriptorTmpl = `meta:
  name: app
plugs:
  p:
    path: PATH
resources:
  r: {type: "gcompose/file-adapter:dev", config: {path: a}}
`

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeZip(t *testing.T, path string, files map[string]string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for name, body := range files {
		w, _ := zw.Create(name)
		w.Write([]byte(body))
	}
	zw.Close()
	f.Close()
}

func load(t *testing.T, files ...string) *descriptor.App {
	t.Helper()
	app, ds := descriptor.Load(context.Background(), descriptor.Options{}, files...)
	if ds.HasErrors() {
		t.Fatalf("load: %v", ds)
	}
	return app
}

// Every escape is refused at the plug's path, file:line:col; paths inside
// the project (the descriptor's directory or the working directory), after
// symbolic links, are accepted and resolved.
func TestPlugPaths(t *testing.T) {
	root := t.TempDir()
	project := filepath.Join(root, "project")
	work := filepath.Join(root, "work")
	for _, d := range []string{filepath.Join(project, "data"), filepath.Join(work, "w"), filepath.Join(root, "outside")} {
		os.MkdirAll(d, 0o755)
	}
	os.Symlink("/etc", filepath.Join(project, "etc-link"))
	os.Symlink(filepath.Join(project, "data"), filepath.Join(project, "data-link"))
	os.Symlink(filepath.Join(root, "outside"), filepath.Join(project, "out-link"))
	pol := plugpath.Policy{WorkDir: work}
	for _, tc := range []struct {
		name, path string
		allowed    []string
		want       string // resolved path, or an error fragment
		ok         bool
	}{
		{name: "relative inside", path: "./data", want: filepath.Join(project, "data"), ok: true},
		{name: "not created yet", path: "out/sub", want: filepath.Join(project, "out/sub"), ok: true},
		{name: "absolute inside", path: filepath.Join(project, "data"), want: filepath.Join(project, "data"), ok: true},
		{name: "in the working directory", path: filepath.Join(work, "w"), want: filepath.Join(work, "w"), ok: true},
		{name: "link inside to inside", path: "data-link/x", want: filepath.Join(project, "data/x"), ok: true},
		{name: "root", path: "/", want: "outside the project"},
		{name: "dot-dot", path: "../../../../../../etc/cron.d", want: "is /etc/cron.d, outside the project"},
		{name: "dot-dot to a sibling", path: "../outside", want: "outside the project"},
		{name: "link to /etc", path: "etc-link", want: "is /etc, outside the project"},
		{name: "link below, not created", path: "out-link/new", want: "outside/new, outside the project"},
		{name: "the project itself holds .gcompose", path: ".", want: "gcompose's own directory"},
		{name: "the state directory", path: ".gcompose/state", want: "gcompose's own directory"},
		{name: "a secret", path: "${secret.key}", want: "${secret.key} cannot be used in a plug path"},
		{name: "a variable", path: "/data/${var.dir}", want: "is not expanded in a plug path"},
		{name: "unterminated", path: "${oops", want: "unterminated"},
		{name: "escaped dollar", path: "./$${x}", want: filepath.Join(project, "${x}"), ok: true},
		{name: "host path allowed", path: "/srv/shared/x", allowed: []string{"/srv/shared"}, want: "/srv/shared/x", ok: true},
		{name: "allowance is per path", path: "/srv/other", allowed: []string{"/srv/shared"}, want: "--allow-host-path /srv/other"},
		{name: "relative allowance", path: filepath.Join(work, "rel"), allowed: []string{"rel"}, want: filepath.Join(work, "rel"), ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(project, "app.yaml")
			write(t, f, strings.Replace(descriptorTmpl, "PATH", `"`+tc.path+`"`, 1))
			pol.Allowed = tc.allowed
			got, ds := plugpath.Resolve(load(t, f), pol)
			if tc.ok {
				if len(ds) != 0 || got["p"] != tc.want {
					t.Fatalf("got %q, %v; want %q", got["p"], ds, tc.want)
				}
				return
			}
			if len(ds) != 1 || got["p"] != "" {
				t.Fatalf("got %q, %v; want an error", got["p"], ds)
			}
			msg := ds[0].String()
			if !strings.HasPrefix(msg, f+":5:11: plug p: ") || !strings.Contains(msg, tc.want) {
				t.Fatalf("error %q; want it at %s:5:11 and to contain %q", msg, f, tc.want)
			}
			t.Logf("%s: %s", tc.path, msg)
		})
	}
}

// A package never plugs outside its project, even with an allowance; its
// relative paths are relative to the directory holding it; a descriptor
// of one's own that overrides its plug may use an allowed host path.
func TestPackagePlugs(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "data"), 0o755)
	pkg := filepath.Join(dir, "app.zip")
	pol := plugpath.Policy{WorkDir: t.TempDir(), Allowed: []string{"/"}}
	for _, tc := range []struct{ path, want string }{
		{"/", "a package can never plug a path outside its project"},
		{"../../../../etc", "a package can never plug a path outside its project"},
		{"/var/run/docker.sock", "a package can never plug a path outside its project"},
		{"./data", filepath.Join(dir, "data")},
	} {
		writeZip(t, pkg, map[string]string{"app.yaml": strings.Replace(descriptorTmpl, "PATH", `"`+tc.path+`"`, 1)})
		got, ds := plugpath.Resolve(load(t, pkg), pol)
		if strings.HasPrefix(tc.want, "/") {
			if len(ds) != 0 || got["p"] != tc.want {
				t.Fatalf("%s: %q, %v", tc.path, got["p"], ds)
			}
			continue
		}
		if len(ds) != 1 || !strings.HasPrefix(ds[0].String(), pkg+"/app.yaml:5:11: ") || !strings.Contains(ds[0].String(), tc.want) {
			t.Fatalf("%s in a package: %v", tc.path, ds)
		}
		t.Logf("%s in a package: %s", tc.path, ds[0])
	}
	// Overridden by the user's own descriptor, with an allowance.
	writeZip(t, pkg, map[string]string{"app.yaml": strings.Replace(descriptorTmpl, "PATH", `"/"`, 1)})
	own := filepath.Join(dir, "mine.yaml")
	write(t, own, "plugs:\n  p:\n    path: /srv/shared\n")
	pol.Allowed = []string{"/srv/shared"}
	got, ds := plugpath.Resolve(load(t, pkg, own), pol)
	if len(ds) != 0 || got["p"] != "/srv/shared" {
		t.Fatalf("override: %q, %v", got["p"], ds)
	}
}

package main

import (
	"archive/zip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const plugged = `meta:
  name: APP
secrets:
  key: {env: PLUG_TEST_SECRET}
plugs:
  files:
    path: PLUGPATH
resources:
  a: {type: IMAGE, config: {path: a.txt, content: "a"}}
`

// Every way a descriptor could plug a path outside its project is refused
// at the plug's file:line:col before any adapter runs; a host path the user
// allows explicitly is mounted, and the file adapter writes there.
func TestE2EPlugsConfinedToTheProject(t *testing.T) {
	e := newEnv(t)
	t.Setenv("PLUG_TEST_SECRET", "/")
	outside := t.TempDir()
	os.Chmod(outside, 0o777)
	os.Symlink("/etc", filepath.Join(e.dir, "etc-link"))
	for _, tc := range []struct{ plug, want string }{
		{"/", "is /, outside the project"},
		{"../../../../../../../etc", "is /etc, outside the project"},
		{"etc-link", "is /etc, outside the project"},
		{outside, "outside the project"},
		{".", "gcompose's own directory"},
		{"${secret.key}", "${secret.key} cannot be used in a plug path"},
	} {
		f := e.write("app.yaml", strings.Replace(plugged, "PLUGPATH", `"`+tc.plug+`"`, 1))
		for _, cmd := range [][]string{{"deploy", f, "--yes"}, {"validate", f}} {
			r := e.gc(cmd...)
			if cmd[0] == "validate" {
				r = gcPlain(cmd...)
			}
			if r.code != exitError || !strings.Contains(r.stderr, f+":7:11: plug files: ") || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("%s with plug %q: exit %d\n%s%s", cmd[0], tc.plug, r.code, r.stdout, r.stderr)
			}
			if cmd[0] == "deploy" {
				t.Logf("deploy with plug %q:\n%s", tc.plug, r.stderr)
			}
		}
	}
	// A package can never plug outside its project, allowance or not.
	pkg := filepath.Join(e.dir, "app.zip")
	zf, _ := os.Create(pkg)
	zw := zip.NewWriter(zf)
	w, _ := zw.Create("app.yaml")
	w.Write([]byte(strings.NewReplacer("APP", e.app, "IMAGE", e.image, "PLUGPATH", `"/"`).Replace(plugged)))
	zw.Close()
	zf.Close()
	r := e.gc("deploy", pkg, "--yes", "--allow-host-path", "/")
	if r.code != exitError || !strings.Contains(r.stderr, pkg+"/app.yaml:7:11: plug files: / is /, outside the project") || !strings.Contains(r.stderr, "a package can never plug a path outside its project") {
		t.Fatalf("package plugging /: exit %d\n%s", r.code, r.stderr)
	}
	t.Logf("package plugging / with --allow-host-path /:\n%s", r.stderr)
	if ids := e.gc("state", "list", "--app", e.app); strings.Contains(ids.stdout, "resources.a") {
		t.Fatalf("a refused deploy wrote state:\n%s", ids.stdout)
	}

	// Allowed explicitly: the flag, then the config file.
	f := e.write("app.yaml", strings.Replace(plugged, "PLUGPATH", `"`+outside+`"`, 1))
	e.must("deploy", f, "--yes", "--allow-host-path", outside)
	if b, err := os.ReadFile(filepath.Join(outside, "a.txt")); err != nil || string(b) != "a" {
		t.Fatalf("a.txt in the allowed host path: %q, %v", b, err)
	}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("allow_host_paths: ["+outside+"]\n"), 0o644)
	t.Setenv("GCOMPOSE_CONFIG", cfg)
	e.must("destroy", f, "--yes")
	if _, err := os.Stat(filepath.Join(outside, "a.txt")); !os.IsNotExist(err) {
		t.Fatalf("a.txt after destroy: %v", err)
	}
}

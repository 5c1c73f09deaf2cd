package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gcompose on a remote engine (docs/engines.md): GCOMPOSE_REMOTE_ENGINE_HOST
// names one that does not see this machine's /tmp but sees /var/tmp at the
// same paths (.ci/podman starts such a Podman on 127.0.0.1).
func TestE2ERemoteEngine(t *testing.T) {
	host := os.Getenv("GCOMPOSE_REMOTE_ENGINE_HOST")
	if host == "" {
		t.Skip("GCOMPOSE_REMOTE_ENGINE_HOST unset: no remote engine to test (eval \"$(.ci/podman start)\" gives one)")
	}
	t.Setenv("DOCKER_HOST", host)
	const app = `
meta:
  name: APP
plugs:
  files:
    path: ./out
resources:
  readme:
    type: IMAGE
    config: {path: README, content: "on a remote engine"}
`
	// A project under /tmp: the engine would mount a directory of its own
	// machine, so the plug is refused, saying why, and nothing is deployed.
	e := newEnv(t)
	f := e.write("app.yaml", app)
	r := e.gc("deploy", f, "--yes")
	if r.code == 0 {
		t.Fatalf("deploy with a plug the engine does not see succeeded:\n%s%s", r.stdout, r.stderr)
	}
	for _, want := range []string{e.files, host, "does not see this machine's files", "docs/engines.md"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, r.stderr)
		}
	}
	// Plan cannot ask the adapter either, for the same reason; nothing is
	// deployed.
	if p := e.gc("plan", f); p.code == 0 || !strings.Contains(p.stderr, "does not see this machine's files") {
		t.Errorf("plan with a plug the engine does not see: exit %d\n%s%s", p.code, p.stdout, p.stderr)
	}
	if p := e.gc("ps", f); p.code != 0 || !strings.Contains(p.stdout, "nothing deployed") {
		t.Errorf("ps after the refusal: exit %d\n%s%s", p.code, p.stdout, p.stderr)
	}
	if e.exists("README") {
		t.Error("README written although the deploy was refused")
	}

	// A project under /var/tmp, which the engine sees at the same path:
	// deploy, nothing left to do, destroy.
	dir, err := os.MkdirTemp("/var/tmp", "gcompose-remote-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	shared := &env{t: t, dir: dir, state: filepath.Join(dir, "state"), files: filepath.Join(dir, "out"), app: e.app + "-shared", image: e.image}
	if err := os.Mkdir(shared.files, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared.files, 0o777)
	t.Cleanup(shared.assertNoContainers)
	f = shared.write("app.yaml", app)
	shared.must("deploy", f, "--yes")
	if got := shared.read("README"); got != "on a remote engine" {
		t.Errorf("README = %q", got)
	}
	if p := shared.gc("plan", f, "--detailed-exitcode"); p.code != 0 {
		t.Errorf("plan after deploy: exit %d, want 0 (no changes)\n%s%s", p.code, p.stdout, p.stderr)
	}
	shared.must("destroy", f, "--yes")
	if shared.exists("README") {
		t.Error("README still there after destroy")
	}
}

package runner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/runner"
)

// remoteEngine points this test at the engine GCOMPOSE_REMOTE_ENGINE_HOST
// names: one that does not see this machine's /tmp (.ci/podman starts a
// Podman on 127.0.0.1 in a mount namespace where /tmp is its own), which is
// what an engine on another machine is to gcompose.
func remoteEngine(t *testing.T) {
	t.Helper()
	host := os.Getenv("GCOMPOSE_REMOTE_ENGINE_HOST")
	if host == "" {
		t.Skip("GCOMPOSE_REMOTE_ENGINE_HOST unset: no remote engine to test (eval \"$(.ci/podman start)\" gives one)")
	}
	t.Setenv("DOCKER_HOST", host)
}

// On a remote engine a call without plugs runs; one mounting a directory the
// engine does not see is refused with the reason, before any container of
// the call is made; one mounting a directory it sees at the same path runs.
func TestRemoteEngine(t *testing.T) {
	remoteEngine(t)
	ctx, r, img := setup(t)

	s := spec(img, "echo")
	s.Stdin = []byte("no plugs")
	if res, err := r.Run(ctx, s); err != nil || string(res.Stdout) != "no plugs" {
		t.Fatalf("a call without mounts on the remote engine: %v (stdout %q)", err, res.Stdout)
	}

	hidden := t.TempDir() // under /tmp, which the engine does not see
	s = spec(img, "probe")
	s.Mounts = []runner.Mount{{HostPath: hidden, ContainerPath: "/data"}}
	for i := 0; i < 2; i++ { // the second call gets the remembered verdict
		_, err := r.Run(ctx, s)
		if !errors.Is(err, runner.ErrRemoteEngine) {
			t.Fatalf("call %d mounting %s on an engine that does not see it: %v, want ErrRemoteEngine", i+1, hidden, err)
		}
		for _, want := range []string{hidden, os.Getenv("GCOMPOSE_REMOTE_ENGINE_HOST"), "docs/engines.md"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal does not say %q: %v", want, err)
			}
		}
	}
	// The probe directory is made beside the mounted one, and removed.
	entries, _ := os.ReadDir(filepath.Dir(hidden))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".gcompose-engine-probe-") {
			t.Errorf("the probe left %s in %s", e.Name(), filepath.Dir(hidden))
		}
	}

	// /var/tmp is the same directory for the engine and for gcompose.
	shared, err := os.MkdirTemp("/var/tmp", "gcompose-remote-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	s.Mounts = []runner.Mount{{HostPath: shared, ContainerPath: "/data"}}
	res, err := r.Run(ctx, s)
	if err != nil {
		t.Fatalf("a call mounting %s, which the engine sees: %v", shared, err)
	}
	if !strings.Contains(string(res.Stdout), `"/data":true`) {
		t.Errorf("the adapter could not write to the shared mount: %s", res.Stdout)
	}
}

// An ssh:// engine address says what to do instead of failing to dial.
func TestSSHEngineAddressExplained(t *testing.T) {
	t.Setenv("DOCKER_HOST", "ssh://someone@engine.example")
	_, err := runner.New(context.Background(), runner.Options{})
	if err == nil || !strings.Contains(err.Error(), "does not run ssh") ||
		!strings.Contains(err.Error(), "ssh -NL 127.0.0.1:2376:/var/run/docker.sock someone@engine.example") {
		t.Fatalf("DOCKER_HOST=ssh://...: %v", err)
	}
}

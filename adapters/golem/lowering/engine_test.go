package lowering

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/adapter"
	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/internal/testimage"
	"github.com/gcompose/gcompose/protocol"
)

// fakeEngine serves, on a unix socket under a symlink, an engine that
// answers GET /info with an ID of its own; it returns DOCKER_HOST through
// the symlink and the ID.
func fakeEngine(t *testing.T) (host, id string) {
	t.Helper()
	// A short path: a unix socket's is limited to ~100 bytes.
	dir, err := os.MkdirTemp("", "engine-plug-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "other.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 8)
	rand.Read(b)
	id = "fake-engine-" + hex.EncodeToString(b)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/info") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ID":"`+id+`"}`)
	})}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("fake engine: %v", err)
		}
	}()
	t.Cleanup(func() { srv.Close() })
	link := filepath.Join(dir, "engine.sock")
	if err := os.Symlink(sock, link); err != nil {
		t.Fatal(err)
	}
	return "unix://" + link, id
}

// TestDockerPlugMountsTheEngineDockerHostNames: the Golem lowering's
// Docker-socket plug mounts, at /var/run/docker.sock in a real adapter
// container, the socket DOCKER_HOST names (here a symlink to a socket of
// the test's, answering /info with an ID of its own; Podman's when
// GCOMPOSE_PODMAN_HOST is set), not the default Docker socket.
func TestDockerPlugMountsTheEngineDockerHostNames(t *testing.T) {
	testimage.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	image := testimage.Image(t, ctx, "./internal/testimage/testdata/testadapter", "gcompose-test/testadapter:engine-plug")
	labels := testimage.Labels(t)
	r, err := runner.New(ctx, runner.Options{Labels: labels, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		r.Close()
		if left := testimage.ContainersLabelled(t, context.Background(), testimage.Label, labels[testimage.Label]); len(left) > 0 {
			t.Errorf("containers left behind: %v", left)
		}
	}()
	cl, err := adapter.New(adapter.Options{Runner: r, CacheDir: t.TempDir(), Version: "test", Workspace: "/work"})
	if err != nil {
		t.Fatal(err)
	}
	// engineInfo is the ID and version of the engine the adapter reaches
	// through its plug.
	engineInfo := func(t *testing.T, engine string) (id, version string) {
		t.Helper()
		pl := Golem{Engine: engine}.Plugs()[DockerPlug]
		if pl.Err != nil {
			t.Fatal(pl.Err)
		}
		pl.ResourceTypes = nil // offered to the test adapter as to the payments image
		tg := adapter.Target{App: "engineplug", Name: "resources.engine", Image: image, Config: map[string]any{"mode": "engine"},
			Plugs: map[string]adapter.Plug{DockerPlug: pl}}
		st, err := cl.State(ctx, tg, protocol.Present, nil)
		if err != nil {
			t.Fatal(err)
		}
		id, _ = st.State["engine_id"].(string)
		version, _ = st.State["engine_version"].(string)
		if id == "" {
			t.Fatalf("state %v: no engine_id", st.State)
		}
		return id, version
	}
	t.Run("symlinked socket", func(t *testing.T) {
		host, id := fakeEngine(t)
		if got, _ := engineInfo(t, host); got != id {
			t.Fatalf("DOCKER_HOST=%s: the adapter reached engine %q through its plug, want %q", host, got, id)
		}
	})
	if podman := os.Getenv("GCOMPOSE_PODMAN_HOST"); podman != "" && os.Getenv("DOCKER_HOST") == podman {
		t.Run("podman", func(t *testing.T) {
			info, err := testimage.Client(t).Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Podman's /info makes up a new ID on every call: its version tells it from Docker.
			if _, got := engineInfo(t, podman); got != info.ServerVersion {
				t.Fatalf("DOCKER_HOST=%s: the adapter reached an engine of version %q through its plug, want Podman's %q", podman, got, info.ServerVersion)
			}
		})
	}
}

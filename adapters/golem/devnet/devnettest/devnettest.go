// Package devnettest runs the devnet for tests of the devnet itself and of
// the Golem adapters: behind the OpenAPI checker on a loopback port, with
// the checks that nothing it made is left when the test ends, and builds
// its demo provider images. Only tests import it.
package devnettest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/openapi"
	"github.com/gcompose/gcompose/internal/testimage"
)

// Serve serves srv, the devnet of instance, on a loopback port and returns
// its URL. Every exchange the OpenAPI files describe is checked against
// them; what a real yagna answers beyond them (devnet.BeyondSpec), the
// devnet's own endpoints, websockets and event streams go through
// unchecked. When the test ends: beforeClose runs (when not nil: removing
// what a failed test left), the checker reports, the listener and the
// devnet are closed, and no container or network labelled with the
// instance may be left.
func Serve(t testing.TB, docker *client.Client, srv *devnet.Server, instance string, beforeClose func(context.Context)) string {
	t.Helper()
	checker, err := openapi.NewChecker()
	if err != nil {
		t.Fatalf("openapi: %v", err)
	}
	checker.Exempt = devnet.BeyondSpec
	checked, direct := checker.Handler(srv.Handler()), srv.Handler()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A websocket is an Upgrade, or (app_key_param) a request with
		// ?authToken=, which the checker does not know the scheme allows.
		_, _, err := checker.Spec.Find(r.Method, r.URL.Path)
		if err != nil || r.Header.Get("Upgrade") != "" || r.URL.Query().Has("authToken") ||
			strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			direct.ServeHTTP(w, r)
			return
		}
		checked.ServeHTTP(w, r)
	})}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if beforeClose != nil {
			beforeClose(ctx)
		}
		checker.Report(t)
		ops := make([]string, 0, len(checker.Seen()))
		for op := range checker.Seen() {
			ops = append(ops, op)
		}
		sort.Strings(ops)
		t.Logf("OpenAPI-checked operations: %s", strings.Join(ops, " "))
		_ = hs.Close()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("devnet Close: %v", err)
		}
		f := filters.NewArgs(filters.Arg("label", "gcompose.devnet="+instance))
		if cs, err := docker.ContainerList(ctx, container.ListOptions{All: true, Filters: f}); err != nil || len(cs) != 0 {
			t.Errorf("after Close: %d devnet containers left (err %v)", len(cs), err)
		}
		if ns, err := docker.NetworkList(ctx, network.ListOptions{Filters: f}); err != nil || len(ns) != 0 {
			t.Errorf("after Close: %d devnet networks left (err %v)", len(ns), err)
		}
	})
	return "http://" + ln.Addr().String()
}

// DemoImage builds images/<name>.Dockerfile of the module (busybox,
// devnet-init and cmd/<name>: "devnet-db", "devnet-web") as an image named
// tag, with labels besides those the Dockerfile sets, once per test binary
// run, and returns its reference (tag with the content's hash added,
// testimage.DockerfileImage): map the image hash to that reference in the
// devnet's Config.Images, since another checkout's image of the same name
// and golem.image.hash label may be newer. It needs a static /bin/busybox
// (apt-get install -y busybox-static): without one the test is skipped, or
// fails when CI is set.
func DemoImage(t testing.TB, ctx context.Context, name, tag string, labels map[string]string) string {
	t.Helper()
	if _, err := os.Stat("/bin/busybox"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("/bin/busybox missing (apt-get install -y busybox-static): %v", err)
		}
		t.Skipf("/bin/busybox missing (apt-get install -y busybox-static)")
	}
	d := testimage.Dockerfile{
		Path:   "images/" + name + ".Dockerfile",
		Mains:  []string{"./cmd/devnet-init", "./cmd/" + name},
		Files:  map[string]string{"busybox": "/bin/busybox"},
		Labels: labels,
	}
	return testimage.DockerfileImage(t, ctx, d, tag)
}

var initOnce struct {
	sync.Once
	path string
	err  error
}

// Init builds cmd/devnet-init, static for Linux, once per test binary run,
// and returns its path for devnet.Options.Init: the PID 1 and VPN join the
// devnet puts into every payload container. Failures fail the test.
func Init(t testing.TB) string {
	t.Helper()
	initOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			initOnce.err = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		// Not t.TempDir: the binary outlives the test that asked first.
		dir, err := os.MkdirTemp("", "gcompose-devnet-init-")
		if err != nil {
			initOnce.err = err
			return
		}
		initOnce.path = filepath.Join(dir, "devnet-init")
		cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", "-o", initOnce.path, "./cmd/devnet-init")
		cmd.Dir = filepath.Dir(strings.TrimSpace(string(out)))
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if b, err := cmd.CombinedOutput(); err != nil {
			initOnce.err = fmt.Errorf("go build ./cmd/devnet-init: %v\n%s", err, b)
		}
	})
	if initOnce.err != nil {
		t.Fatalf("devnet-init: %v", initOnce.err)
	}
	return initOnce.path
}

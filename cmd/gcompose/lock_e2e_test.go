package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/gcompose/gcompose/core/state/etcd/etcdtest"
	"github.com/gcompose/gcompose/internal/syncwriter"
	"github.com/gcompose/gcompose/internal/testimage"
)

// TestE2EHostAndContainerShareOneLock runs gcompose on the host and the
// documented containerized gcompose (docs/ci.md: host network, the Docker
// socket, the workspace at its own path) on one state, file and etcd. The
// container shares the host's hostname but not its PIDs, which is what
// made the old PID-guessing rule call a live host run's lock stale. Now:
// the second run is refused (or waits with --lock-timeout), and the first
// completes untouched, in both directions.
func TestE2EHostAndContainerShareOneLock(t *testing.T) {
	testimage.RequireDocker(t)
	ctx := context.Background()
	images := lockImages{cli: buildCLIImage(t, ctx), adapter: testimage.Image(t, ctx, "./cmd/file-adapter", fileAdapterName)}
	cluster := etcdtest.Start(t)
	for _, backend := range []string{"file", "etcd"} {
		t.Run(backend, func(t *testing.T) {
			ws := t.TempDir()
			stateURL := filepath.Join(ws, ".gcompose", "state")
			if backend == "etcd" {
				stateURL = "etcd://" + cluster.HostPorts() + "/lock-e2e"
			}
			hostAndContainer(t, ws, stateURL, images)
		})
	}
}

// slowChain is three resources in a line whose actions take 1.5 s each.
const slowChain = `meta:
  name: APP
plugs:
  files:
    path: ./out
resources:
  r0: {type: IMAGE, config: {path: r0.txt, content: "0", delay_ms: 1500, journal: adapter.log}}
  r1: {type: IMAGE, dependencies: {prev: r0}, config: {path: r1.txt, content: "1", delay_ms: 1500, journal: adapter.log}}
  r2: {type: IMAGE, dependencies: {prev: r1}, config: {path: r2.txt, content: "2", delay_ms: 1500, journal: adapter.log}}
`

// proc is one gcompose run, on the host or in a container.
type proc struct {
	out  *syncwriter.Buffer // stdout and stderr
	pid  int                // a host run's
	done chan struct{}      // closed when the run ended; code is then its exit code
	code int
	stop func() // kills the run
}

func (p *proc) ended() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) wait(t *testing.T, what string) (int, string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(3 * time.Minute):
		p.stop()
		t.Fatalf("%s did not finish within 3 minutes:\n%s", what, p.out.String())
	}
	return p.code, p.out.String()
}

// lockImages are the references of the images hostAndContainer runs.
type lockImages struct{ cli, adapter string }

func hostAndContainer(t *testing.T, ws, stateURL string, images lockImages) {
	app := appNameFor(t)
	out := filepath.Join(ws, "out")
	if err := os.MkdirAll(out, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(out, 0o777)
	desc := strings.NewReplacer("APP", app, "IMAGE", images.adapter).Replace(slowChain)
	if err := os.WriteFile(filepath.Join(ws, "app.yaml"), []byte(desc), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ids := testimage.ContainersLabelled(t, context.Background(), "gcompose.app", app); len(ids) > 0 {
			t.Errorf("containers of %s left behind: %v", app, ids)
		}
	})
	host := func(args ...string) *proc {
		c := exec.Command(gcomposeBinary(t), append(args, "--state", stateURL)...)
		c.Dir = ws
		c.Env = append(os.Environ(), "GCOMPOSE_PROGRESS=plain")
		p := &proc{out: &syncwriter.Buffer{}, done: make(chan struct{}), stop: func() { _ = c.Process.Kill() }}
		c.Stdout, c.Stderr = p.out, p.out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		p.pid = c.Process.Pid
		go func() {
			defer close(p.done)
			if err := c.Wait(); err != nil && c.ProcessState == nil {
				fmt.Fprintf(p.out, "waiting for %s: %v\n", c.Path, err)
				p.code = -1
				return
			}
			p.code = c.ProcessState.ExitCode()
		}()
		return p
	}
	// The container docs/ci.md documents (docker-compose's gcompose service
	// runs the same): host network, the Engine's socket (the one this test
	// runs on: DOCKER_HOST) at /var/run/docker.sock, the workspace at its
	// own path. Created and read through the Engine API.
	docker := testimage.Client(t)
	labels := testimage.Labels(t)
	socket := engineSocket(t)
	container := func(args ...string) *proc {
		ctx := context.Background()
		c, err := docker.ContainerCreate(ctx, &dcontainer.Config{
			Image: images.cli, Cmd: append(args, "--state", stateURL), WorkingDir: ws, Labels: labels,
			Env: []string{"XDG_CACHE_HOME=" + filepath.Join(ws, ".gcompose", "cache"), "GCOMPOSE_PROGRESS=plain"},
		}, &dcontainer.HostConfig{NetworkMode: "host", Binds: []string{socket + ":/var/run/docker.sock", ws + ":" + ws}}, nil, nil, "")
		if err != nil {
			t.Fatalf("creating the gcompose container (%s %s): %v", images.cli, strings.Join(args, " "), err)
		}
		remove := func() { _ = docker.ContainerRemove(context.Background(), c.ID, dcontainer.RemoveOptions{Force: true}) }
		if err := docker.ContainerStart(ctx, c.ID, dcontainer.StartOptions{}); err != nil {
			remove()
			t.Fatalf("starting the gcompose container %s: %v", c.ID, err)
		}
		p := &proc{out: &syncwriter.Buffer{}, done: make(chan struct{}), stop: remove}
		go func() {
			defer close(p.done)
			defer remove()
			p.code = -1
			waitC, errC := docker.ContainerWait(ctx, c.ID, dcontainer.WaitConditionNotRunning)
			select {
			case w := <-waitC:
				p.code = int(w.StatusCode)
			case err := <-errC:
				fmt.Fprintf(p.out, "waiting for container %s: %v\n", c.ID, err)
				return
			}
			logs, err := docker.ContainerLogs(ctx, c.ID, dcontainer.LogsOptions{ShowStdout: true, ShowStderr: true})
			if err != nil {
				fmt.Fprintf(p.out, "logs of container %s: %v\n", c.ID, err)
				return
			}
			defer logs.Close()
			if _, err := stdcopy.StdCopy(p.out, p.out, logs); err != nil {
				fmt.Fprintf(p.out, "logs of container %s: %v\n", c.ID, err)
			}
		}()
		return p
	}
	// lockPID is the holder's PID as the lock describes it; 0: no lock.
	lockPID := func() int {
		var o, e strings.Builder
		run(context.Background(), []string{"gcompose", "state", "lock", "--app", app, "--state", stateURL}, strings.NewReader(""), &o, &e)
		if i := strings.Index(o.String(), `"pid": `); i >= 0 {
			pid, _ := strconv.Atoi(strings.TrimRight(strings.Fields(o.String()[i+7:])[0], ","))
			return pid
		}
		return 0
	}
	// lockHolder is the holder's PID once p holds the lock.
	lockHolder := func(p *proc) int {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && !p.ended(); time.Sleep(50 * time.Millisecond) {
			if pid := lockPID(); pid != 0 {
				return pid
			}
		}
		t.Fatalf("the first run never held the lock:\n%s", p.out.String())
		return 0
	}
	// journal is the actions in the adapter's journal, in order.
	journal := func() string {
		b, _ := os.ReadFile(filepath.Join(out, "adapter.log"))
		var kinds []string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if f := strings.Fields(l); len(f) > 0 {
				kinds = append(kinds, f[0])
			}
		}
		return strings.Join(kinds, " ")
	}
	checkFiles := func(when string) {
		t.Helper()
		for i := 0; i < 3; i++ {
			if b, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("r%d.txt", i))); err != nil || string(b) != fmt.Sprint(i) {
				t.Fatalf("%s: r%d.txt = %q, %v", when, i, b, err)
			}
		}
	}

	// 1. The host deploys; the container, started meanwhile, is refused.
	first := host("deploy", "app.yaml", "--yes")
	pid := lockHolder(first)
	if pid != first.pid {
		t.Fatalf("lock held by pid %d, the host run is %d", pid, first.pid)
	}
	second := container("deploy", "app.yaml", "--yes")
	code, text := second.wait(t, "the containerized deploy")
	if code != exitError || !strings.Contains(text, "is locked by") || !strings.Contains(text, fmt.Sprintf("(pid %d", pid)) {
		t.Fatalf("containerized deploy while the host deploys: exit %d, want a refusal naming pid %d\n%s", code, pid, text)
	}
	t.Logf("containerized deploy while the host run deploys (refused):\n%s", text)
	code, text = first.wait(t, "the host deploy")
	if code != 0 || strings.Contains(text, "removed") || strings.Contains(text, "took over") {
		t.Fatalf("host deploy: exit %d\n%s", code, text)
	}
	checkFiles("after the host deploy")

	// 2. The container destroys; the host, started meanwhile with
	// --lock-timeout, waits for it and then deploys again.
	first = container("destroy", "app.yaml", "--yes")
	cpid := lockHolder(first)
	second = host("deploy", "app.yaml", "--yes", "--lock-timeout", "2m")
	// The host deploy must have started while the destroy still held the
	// lock, or its wait is not exercised: the lock is still the
	// container's, and the destroy has not deleted everything yet.
	if h := lockPID(); h != cpid || first.ended() || strings.Count(journal(), "delete") == 3 {
		t.Fatalf("the host deploy started after the containerized destroy let the lock go (holder %d, was %d; journal %q): its wait is not tested", h, cpid, journal())
	}
	code, text = first.wait(t, "the containerized destroy")
	if code != 0 {
		t.Fatalf("containerized destroy: exit %d\n%s", code, text)
	}
	t.Logf("containerized destroy (lock holder pid %d in its container):\n%s", cpid, text)
	code, text = second.wait(t, "the waiting host deploy")
	if code != 0 {
		t.Fatalf("host deploy with --lock-timeout: exit %d\n%s", code, text)
	}
	checkFiles("after the waiting host deploy")
	// The adapter's journal: three creates, three deletes, three creates, in
	// that order: no run worked while the other held the lock, and the
	// waiting deploy, started before the deletes, redid the work after them.
	if got := journal(); got != "create create create delete delete delete create create create" {
		t.Fatalf("adapter journal: %s", got)
	}
	if code, text := host("destroy", "app.yaml", "--yes").wait(t, "the final destroy"); code != 0 {
		t.Fatalf("destroy: exit %d\n%s", code, text)
	}
}

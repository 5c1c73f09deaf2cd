package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/state/etcd/etcdtest"
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

type proc struct {
	cmd *exec.Cmd
	out *bytes.Buffer
}

func (p *proc) wait(t *testing.T, what string) (int, string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		p.cmd.Process.Kill()
		t.Fatalf("%s did not finish:\n%s", what, p.out.String())
	}
	return p.cmd.ProcessState.ExitCode(), p.out.String()
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
	start := func(p *exec.Cmd) *proc {
		var b bytes.Buffer
		p.Stdout, p.Stderr = &b, &b
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		return &proc{cmd: p, out: &b}
	}
	host := func(args ...string) *proc {
		c := exec.Command(gcomposeBinary(t), append(args, "--state", stateURL)...)
		c.Dir = ws
		c.Env = append(os.Environ(), "GCOMPOSE_PROGRESS=plain")
		return start(c)
	}
	// The command docs/ci.md documents (docker-compose's gcompose service
	// runs the same container).
	container := func(args ...string) *proc {
		full := []string{"run", "--rm", "--network", "host", "--label", testimage.Label + "=" + t.Name(),
			"-v", "/var/run/docker.sock:/var/run/docker.sock", "-v", ws + ":" + ws, "-w", ws,
			"-e", "XDG_CACHE_HOME=" + filepath.Join(ws, ".gcompose", "cache"), "-e", "GCOMPOSE_PROGRESS=plain",
			images.cli}
		return start(exec.Command("docker", append(append(full, args...), "--state", stateURL)...))
	}
	// lockHolder is the holder's PID as the lock describes it, once locked.
	lockHolder := func(p *proc) int {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			var o, e bytes.Buffer
			run(context.Background(), []string{"gcompose", "state", "lock", "--app", app, "--state", stateURL}, strings.NewReader(""), &o, &e)
			if i := strings.Index(o.String(), `"pid": `); i >= 0 {
				pid, _ := strconv.Atoi(strings.TrimRight(strings.Fields(o.String()[i+7:])[0], ","))
				return pid
			}
			if p.cmd.ProcessState != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("the first run never held the lock:\n%s", p.out.String())
		return 0
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
	if pid != first.cmd.Process.Pid {
		t.Fatalf("lock held by pid %d, the host run is %d", pid, first.cmd.Process.Pid)
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
	code, text = first.wait(t, "the containerized destroy")
	if code != 0 {
		t.Fatalf("containerized destroy: exit %d\n%s", code, text)
	}
	destroyEnded := time.Now()
	t.Logf("containerized destroy (lock holder pid %d in its container):\n%s", cpid, text)
	code, text = second.wait(t, "the waiting host deploy")
	if code != 0 {
		t.Fatalf("host deploy with --lock-timeout: exit %d\n%s", code, text)
	}
	if time.Since(destroyEnded) < 3*time.Second {
		t.Fatalf("the host deploy ended %s after the destroy: it did not redo the work", time.Since(destroyEnded))
	}
	checkFiles("after the waiting host deploy")
	// The adapter's journal: three creates, three deletes, three creates, in
	// that order: no run worked while the other held the lock.
	b, _ := os.ReadFile(filepath.Join(out, "adapter.log"))
	var kinds []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		kinds = append(kinds, strings.Fields(l)[0])
	}
	if got := strings.Join(kinds, " "); got != "create create create delete delete delete create create create" {
		t.Fatalf("adapter journal: %s\n%s", got, b)
	}
	if code, text := host("destroy", "app.yaml", "--yes").wait(t, "the final destroy"); code != 0 {
		t.Fatalf("destroy: exit %d\n%s", code, text)
	}
}

package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"

	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/internal/testimage"
)

const (
	adapterPkg = "./internal/testimage/testdata/testadapter"
	// adapterName names the test adapter image; testimage adds the
	// content's hash to its tag, so that another checkout's run never
	// replaces it.
	adapterName = "gcompose/testadapter:test"
)

// adapterImage builds the test adapter image and returns its reference and
// ID.
func adapterImage(tb testing.TB, ctx context.Context) (ref, id string) {
	tb.Helper()
	ref = testimage.Image(tb, ctx, adapterPkg, adapterName)
	ins, err := testimage.Client(tb).ImageInspect(ctx, ref)
	if err != nil {
		tb.Fatalf("inspect %s: %v", ref, err)
	}
	return ref, ins.ID
}

// syncBuffer is a bytes.Buffer safe for concurrent use, recording each Write.
type syncBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes []string
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes = append(b.writes, string(p))
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// setup builds the test adapter image and returns a runner whose containers
// carry this test's label; when the test ends it checks none is left.
func setup(t *testing.T) (context.Context, *runner.Runner, string) {
	t.Helper()
	ctx, r, img, _ := setupWarnings(t)
	return ctx, r, img
}

// setupWarnings is setup whose runner's warnings are kept.
func setupWarnings(t *testing.T) (context.Context, *runner.Runner, string, *syncBuffer) {
	t.Helper()
	testimage.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	_, img := adapterImage(t, ctx)
	labels := testimage.Labels(t)
	warnings := &syncBuffer{}
	r, err := runner.New(ctx, runner.Options{Labels: labels, Timeout: time.Minute,
		Logger: runner.WarnLogger(func(msg string) { warnings.Write([]byte(msg + "\n")) })})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		left := testimage.ContainersLabelled(t, context.Background(), testimage.Label, labels[testimage.Label])
		if len(left) > 0 {
			t.Errorf("containers left behind: %v", left)
		}
		r.Close()
	})
	return ctx, r, img, warnings
}

func spec(img string, args ...string) runner.Spec {
	return runner.Spec{Image: img, Args: args, App: "runnertest", Resource: "services.db", Call: "state"}
}

func TestRunRoundTrip(t *testing.T) {
	ctx, r, img := setup(t)
	s := spec(img, "echo")
	s.Stdin = []byte(`{"name":"services.db"}`)
	res, err := r.Run(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != `{"name":"services.db"}` || res.ExitCode != 0 {
		t.Fatalf("got stdout %q exit %d", res.Stdout, res.ExitCode)
	}
}

func TestRunStdinClosed(t *testing.T) {
	ctx, r, img := setup(t)
	for _, size := range []int{0, 1, 3 << 20} {
		s := spec(img, "stdin-count")
		s.Stdin = bytes.Repeat([]byte("a"), size)
		s.Timeout = 30 * time.Second
		res, err := r.Run(ctx, s)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		// The adapter read to EOF: stdin was closed after the input.
		if got, want := strings.TrimSpace(string(res.Stdout)), itoa(size)+" <nil>"; got != want {
			t.Fatalf("size %d: adapter saw %q, want %q", size, got, want)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestRunStderrStreamedWithPrefix(t *testing.T) {
	ctx, r, img := setup(t)
	var out syncBuffer
	s := spec(img, "stderr", "3")
	s.Stderr = &out
	res, err := r.Run(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	want := "[services.db] line 0\n[services.db] line 1\n[services.db] line 2\n[services.db] no newline at end\n"
	if out.String() != want {
		t.Fatalf("stderr forwarded as %q, want %q", out.String(), want)
	}
	if len(out.writes) != 4 {
		t.Errorf("want one Write per line, got %q", out.writes)
	}
	if string(res.Stdout) != "ok\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
	if !strings.HasSuffix(res.StderrTail, "line 2\nno newline at end") {
		t.Errorf("stderr tail %q", res.StderrTail)
	}
}

func TestRunStderrIsLive(t *testing.T) {
	ctx, r, img := setup(t)
	// The adapter says "going to sleep" and sleeps: the line must arrive
	// while it runs, not when it ends.
	var out syncBuffer
	s := spec(img, "sleep", "1h")
	s.Stderr = &out
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := r.Run(ctx, s); done <- err }()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "[services.db] going to sleep\n") {
		if time.Now().After(deadline) {
			t.Fatal("stderr line not forwarded while the adapter runs")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	err := <-done
	var ce *runner.CallError
	if !errors.As(err, &ce) || ce.Kind != runner.KindCanceled {
		t.Fatalf("want a canceled CallError, got %v", err)
	}
}

func TestRunStdoutLinesAreLive(t *testing.T) {
	ctx, r, img := setup(t)
	// The adapter prints "first" and waits for /data/release: only a
	// caller that sees the line while the adapter runs can release it.
	dir := t.TempDir()
	s := spec(img, "await-release")
	s.Mounts = []runner.Mount{{HostPath: dir, ContainerPath: "/data"}}
	var lines []string
	s.StdoutLine = func(line []byte) {
		lines = append(lines, string(line))
		if string(line) == "first" {
			if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	res, err := r.Run(ctx, s)
	if err != nil {
		t.Fatalf("%v (the first line did not arrive while the adapter ran)", err)
	}
	if strings.Join(lines, ",") != "first,second" || string(res.Stdout) != "first\nsecond\n" {
		t.Fatalf("lines %q, stdout %q", lines, res.Stdout)
	}
}

func TestRunTimeout(t *testing.T) {
	ctx, r, img := setup(t)
	s := spec(img, "sleep", "1h")
	s.Image, _ = adapterImage(t, ctx)
	s.Timeout = 1500 * time.Millisecond
	start := time.Now()
	_, err := r.Run(ctx, s)
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("timeout took %s to act", took)
	}
	var ce *runner.CallError
	if !errors.As(err, &ce) || ce.Kind != runner.KindTimeout {
		t.Fatalf("want a timeout CallError, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"adapter " + s.Image + " call state for services.db timed out after 1.5s", "going to sleep"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("timeout error does not wrap context.DeadlineExceeded")
	}
}

func TestRunHugeStdoutRefused(t *testing.T) {
	ctx, r, img := setup(t)
	s := spec(img, "huge", itoa(4<<20))
	s.StdoutLimit = 64 << 10
	_, err := r.Run(ctx, s)
	var ce *runner.CallError
	if !errors.As(err, &ce) || ce.Kind != runner.KindStdoutLimit {
		t.Fatalf("want a stdout-limit CallError, got %v", err)
	}
	if !strings.Contains(err.Error(), "more than 65536 bytes to stdout") {
		t.Errorf("unclear error: %v", err)
	}
}

func TestRunNonZeroExit(t *testing.T) {
	ctx, r, img := setup(t)
	res, err := r.Run(ctx, spec(img, "exit", "3"))
	var ce *runner.CallError
	if !errors.As(err, &ce) || ce.Kind != runner.KindExit || ce.ExitCode != 3 {
		t.Fatalf("want an exit CallError with code 3, got %v", err)
	}
	if res == nil || res.ExitCode != 3 {
		t.Fatalf("result %+v", res)
	}
	for _, want := range []string{"exit code 3", "something went wrong", "giving up"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestRunLockedDown(t *testing.T) {
	ctx, r, img, warnings := setupWarnings(t)
	rw, ro := t.TempDir(), t.TempDir()
	s := spec(img, "probe")
	s.Mounts = []runner.Mount{{HostPath: rw, ContainerPath: "/data"}, {HostPath: ro, ContainerPath: "/ro", ReadOnly: true}}
	res, err := r.Run(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		RootfsWritable bool            `json:"rootfs_writable"`
		TmpWritable    bool            `json:"tmp_writable"`
		Interfaces     []string        `json:"interfaces"`
		CapEff         string          `json:"CapEff"`
		NoNewPrivs     string          `json:"NoNewPrivs"`
		Mounts         map[string]bool `json:"mounts"`
		Nofile         string          `json:"nofile"`
		Nproc          string          `json:"nproc"`
		Writable       []string        `json:"writable"`
	}
	if err := json.Unmarshal(res.Stdout, &p); err != nil {
		t.Fatalf("probe answer %q: %v", res.Stdout, err)
	}
	if p.RootfsWritable {
		t.Error("root filesystem is writable")
	}
	if !p.TmpWritable {
		t.Error("/tmp is not writable")
	}
	if len(p.Interfaces) != 1 || p.Interfaces[0] != "lo" {
		t.Errorf("network interfaces %v, want only lo", p.Interfaces)
	}
	if p.CapEff != "0000000000000000" {
		t.Errorf("effective capabilities %s, want none", p.CapEff)
	}
	if p.NoNewPrivs != "1" {
		t.Errorf("NoNewPrivs %q", p.NoNewPrivs)
	}
	if want := map[string]bool{"/data": true, "/ro": false}; !equalMounts(p.Mounts, want) {
		t.Errorf("mounts (path: writable) %v, want %v", p.Mounts, want)
	}
	// Scratch space only, in memory: Docker's /tmp and /dev/shm, and the
	// tmpfs Podman adds on /run and /var/tmp (docs/engines.md).
	for _, dir := range p.Writable {
		if dir != "/tmp" && dir != "/dev/shm" && dir != "/run" && dir != "/var/tmp" {
			t.Errorf("%s is writable (writable: %v)", dir, p.Writable)
		}
	}
	// The same limits on every engine, not the engine's own (Podman's
	// 1048576 is more than an unprivileged runtime may set), or a warning
	// that the engine ignores them (rootless Podman). A Go program raises
	// its soft open-files limit towards the hard one by itself.
	if w := warnings.String(); strings.Contains(w, "does not apply the limits") {
		if !strings.Contains(w, "nofile ulimit") {
			t.Errorf("the engine's limits are its own, the warning does not say so: %s", w)
		}
		t.Logf("engine limits (nofile %s, nproc %s) after the runner's warning: %s", p.Nofile, p.Nproc, w)
		return
	}
	var soft, hard int
	if _, err := fmt.Sscan(p.Nofile, &soft, &hard); err != nil || hard != runner.NofileHard || soft < runner.NofileSoft || soft > hard {
		t.Errorf("open files limit (soft hard) %q, want a hard limit of %d", p.Nofile, runner.NofileHard)
	}
	if want := fmt.Sprintf("%d %d", runner.Nproc, runner.Nproc); p.Nproc != want {
		t.Errorf("process limit (soft hard) %q, want %q", p.Nproc, want)
	}
}

func equalMounts(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestRunNetworkWhenAsked(t *testing.T) {
	ctx, r, img := setup(t)
	s := spec(img, "probe")
	s.Network = "bridge"
	res, err := r.Run(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Stdout), "eth0") {
		t.Errorf("bridge network asked, probe saw %s", res.Stdout)
	}
}

// startSleeper runs a call that sleeps through runner r and waits until it
// is listed; done receives the call's result.
func startSleeper(t *testing.T, ctx context.Context, r *runner.Runner, img, app, resource string) (runner.Container, chan error) {
	t.Helper()
	s := spec(img, "sleep", "1h")
	s.App, s.Resource = app, resource
	var stderr syncBuffer
	s.Stderr = &stderr
	done := make(chan error, 1)
	go func() { _, err := r.Run(ctx, s); done <- err }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		left, err := r.Leftovers(ctx, app)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range left {
			if c.Resource == resource && strings.Contains(stderr.String(), "going to sleep") {
				return c, done
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the running call for %s is not listed as a leftover", resource)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Cleanup removes only the containers of earlier holders of the lock this
// run holds: not those of a live run of another state, not those started
// without a lock (gcompose logs), and nothing before Own.
func TestLabelsLeftoversCleanup(t *testing.T) {
	ctx, r, img := setup(t)
	app := "runnertest-leftovers"
	other, err := runner.New(ctx, runner.Options{Labels: testimage.Labels(t), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// The calls that must survive run until the test cancels them.
	live, stop := context.WithCancel(ctx)
	defer stop()
	unlocked, unlockedDone := startSleeper(t, live, other, img, app, "unlocked")
	other.Own(app, "file:1:2", "old-run")
	abandoned, abandonedDone := startSleeper(t, ctx, other, img, app, "abandoned")
	other.Own(app, "file:9:9", "other-state")
	otherState, otherDone := startSleeper(t, live, other, img, app, "other-state")
	if abandoned.Lock != "old-run" || abandoned.LockScope != "file:1:2" || unlocked.Lock != "" || otherState.LockScope != "file:9:9" {
		t.Fatalf("labels: %+v %+v %+v", abandoned, unlocked, otherState)
	}
	cli := testimage.Client(t)
	ins, err := cli.ContainerInspect(ctx, abandoned.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ins.Config.Labels[runner.LabelManaged] != "true" || ins.Config.Labels[testimage.Label] != t.Name() || ins.Config.Labels[runner.LabelLock] != "old-run" {
		t.Errorf("labels %v", ins.Config.Labels)
	}

	if n, err := r.Cleanup(ctx, app); err != nil || n != 0 {
		t.Fatalf("cleanup before Own removed %d: %v", n, err)
	}
	r.Own(app, "file:1:2", "new-run")
	n, err := r.Cleanup(ctx, app)
	if err != nil || n != 1 {
		t.Fatalf("cleanup removed %d: %v", n, err)
	}
	if err := <-abandonedDone; err == nil {
		t.Fatal("a call whose container was removed succeeded")
	}
	left, err := r.Leftovers(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	var resources []string
	for _, c := range left {
		resources = append(resources, c.Resource)
	}
	sort.Strings(resources)
	if strings.Join(resources, ",") != "other-state,unlocked" {
		t.Fatalf("after cleanup: %v", resources)
	}
	stop()
	<-unlockedDone
	<-otherDone
}

func TestImageIDMissing(t *testing.T) {
	ctx, r, img := setup(t)
	// (Another test binary may have built the same content at the same
	// time, under another ID: compare the ID with itself, and the
	// reference with the shape of an ID.)
	if id, err := r.ImageID(ctx, img); err != nil || id != img {
		t.Fatalf("ImageID(%s) = %s, %v", img, id, err)
	}
	ref, _ := adapterImage(t, ctx)
	if id, err := r.ImageID(ctx, ref); err != nil || !strings.HasPrefix(id, "sha256:") {
		t.Fatalf("ImageID(%s) = %s, %v", ref, id, err)
	}
	_, err := r.ImageID(ctx, "gcompose/does-not-exist:nope")
	if err == nil || !strings.Contains(err.Error(), "image gcompose/does-not-exist:nope not found locally") || !strings.Contains(err.Error(), "never pulls") {
		t.Fatalf("missing image error: %v", err)
	}
	_, err = r.Run(ctx, spec("gcompose/does-not-exist:nope"))
	if err == nil || !strings.Contains(err.Error(), "never pulls") {
		t.Fatalf("run of a missing image: %v", err)
	}
}

func TestMountMissingHostPath(t *testing.T) {
	ctx, r, img := setup(t)
	s := spec(img, "probe")
	s.Mounts = []runner.Mount{{HostPath: filepath.Join(t.TempDir(), "nope"), ContainerPath: "/data"}}
	_, err := r.Run(ctx, s)
	if err == nil || !strings.Contains(err.Error(), "create container") {
		t.Fatalf("mount of a missing path: %v", err)
	}
}

// A mount source whose path holds a comma: Docker mounts it; Podman's
// Docker API cannot (it re-parses the mount as comma-separated options),
// and the error must then say so, naming the path, rather than leave the
// user with "invalid mount option". make test-podman runs this on Podman.
func TestMountSourceWithAComma(t *testing.T) {
	ctx, r, img := setup(t)
	dir := filepath.Join(t.TempDir(), "a,b")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := spec(img, "probe")
	s.Mounts = []runner.Mount{{HostPath: dir, ContainerPath: "/data"}}
	_, err := r.Run(ctx, s)
	if err == nil {
		return // the engine mounts it (Docker)
	}
	if !strings.Contains(err.Error(), "cannot mount "+dir+", whose path holds a comma") {
		t.Fatalf("mount of %s: %v", dir, err)
	}
	t.Logf("refused as it should be: %v", err)
}

func TestRunConcurrent(t *testing.T) {
	ctx, r, img := setup(t)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := spec(img, "echo")
			s.Stdin = []byte(itoa(i))
			res, err := r.Run(ctx, s)
			if err == nil && string(res.Stdout) != itoa(i) {
				err = errors.New("got " + string(res.Stdout))
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// A container its runtime refuses to start fails the call with the
// runtime's reason, whichever step the engine reports it at (Docker: start;
// Podman, which starts the runtime when attached to: attach).
func TestRuntimeRefusalIsExplained(t *testing.T) {
	ctx, r, img := setup(t)
	s := spec(img)
	s.Entrypoint = []string{"/no-such-binary"}
	_, err := r.Run(ctx, s)
	var ce *runner.CallError
	if !errors.As(err, &ce) || ce.Kind != runner.KindEngine {
		t.Fatalf("want an engine CallError, got %v", err)
	}
	if !strings.Contains(err.Error(), "no-such-binary") || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("the runtime's reason is missing: %v", err)
	}
}

// An image known only by Podman's localhost/ name (built by podman, or
// saved there and loaded into Docker) is found by its short name.
func TestLocalhostImageName(t *testing.T) {
	ctx, r, img := setup(t)
	cli := testimage.Client(t)
	local := "localhost/gcompose-test/alias:" + strings.ToLower(t.Name())
	if err := cli.ImageTag(ctx, img, local); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = cli.ImageRemove(context.Background(), local, image.RemoveOptions{}) })
	short := strings.TrimPrefix(local, "localhost/")
	id, err := r.ImageID(ctx, short)
	if err != nil || id != img {
		t.Fatalf("ImageID(%s) = %s, %v; want %s", short, id, err, img)
	}
	s := spec(short, "echo")
	s.Stdin = []byte("hello")
	res, err := r.Run(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "hello" {
		t.Errorf("stdout %q", res.Stdout)
	}
}

// Calls killed while their container exits leave nothing and warn of
// nothing: Podman refuses a forced removal racing the exit ("container state
// improper") in a few percent of such calls, and the removal is retried.
func TestKilledCallsLeaveNothing(t *testing.T) {
	testimage.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, img := adapterImage(t, ctx)
	labels := testimage.Labels(t)
	var warnings syncBuffer
	r, err := runner.New(ctx, runner.Options{Labels: labels, Timeout: time.Minute,
		Logger: runner.WarnLogger(func(msg string) { warnings.Write([]byte(msg + "\n")) })})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const calls, atOnce = 32, 4
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := spec(img, "huge", "20000000")
			s.StdoutLimit = 1 << 20
			_, err := r.Run(ctx, s)
			errs <- err
		}()
		if i%atOnce == atOnce-1 {
			wg.Wait()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		var ce *runner.CallError
		if !errors.As(err, &ce) || ce.Kind != runner.KindStdoutLimit {
			t.Errorf("want a stdout-limit CallError, got %v", err)
		}
	}
	for _, w := range strings.Split(strings.TrimSpace(warnings.String()), "\n") {
		if w != "" && !strings.Contains(w, "does not apply the limits") {
			t.Errorf("warning: %s", w)
		}
	}
	if left := testimage.ContainersLabelled(t, ctx, testimage.Label, labels[testimage.Label]); len(left) > 0 {
		t.Errorf("containers left behind: %v", left)
	}
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/syncwriter"
	"github.com/gcompose/gcompose/internal/testimage"
)

// These tests run the real CLI against the real Docker Engine with the file
// adapter image built from this repository.

// fileAdapterName names the file adapter image built for these tests:
// testimage adds the content's hash to its tag (env.image, or the reference
// testimage.Image returns), so that a run from another checkout never
// replaces it.
const fileAdapterName = "gcompose-test/file-adapter:e2e"

type env struct {
	t     *testing.T
	dir   string // descriptor and plug directory live here
	state string
	files string
	app   string
	// image is the file adapter image's reference.
	image string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	testimage.RequireDocker(t)
	image := testimage.Image(t, context.Background(), "./cmd/file-adapter", fileAdapterName)
	dir := t.TempDir()
	e := &env{t: t, dir: dir, state: filepath.Join(dir, "state"), files: filepath.Join(dir, "out"), app: appNameFor(t), image: image}
	if err := os.MkdirAll(e.files, 0o777); err != nil {
		t.Fatal(err)
	}
	// The adapter runs as root in a container; let the test read what it writes.
	os.Chmod(e.files, 0o777)
	t.Cleanup(func() { e.assertNoContainers() })
	return e
}

func appNameFor(t *testing.T) string {
	s := strings.ToLower(regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(t.Name(), "-"))
	if len(s) > 50 {
		s = s[:50]
	}
	return strings.Trim("e2e-"+s, "-")
}

// write puts a descriptor in the env's directory and returns its path.
func (e *env) write(name, body string) string {
	e.t.Helper()
	body = strings.ReplaceAll(body, "APP", e.app)
	body = strings.ReplaceAll(body, "IMAGE", e.image)
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

type result struct {
	code           int
	stdout, stderr string
}

// gc runs the CLI in-process.
func (e *env) gc(args ...string) result {
	e.t.Helper()
	var out, errb bytes.Buffer
	full := append([]string{"gcompose"}, args...)
	full = append(full, "--state", e.state)
	code := run(context.Background(), full, strings.NewReader(""), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// follow runs a command that runs until interrupted (logs --follow) in
// process until done says its output is complete or limit passes, then
// interrupts it as Ctrl-C would and returns what it printed: a loaded
// machine gets the time it needs, an idle one does not wait for nothing.
func (e *env) follow(limit time.Duration, done func(stdout string) bool, args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncwriter.Buffer
	full := append(append([]string{"gcompose"}, args...), "--state", e.state)
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, full, strings.NewReader(""), &out, &errb) }()
	deadline := time.After(limit)
	for {
		select {
		case code := <-exited:
			return result{code, out.String(), errb.String()}
		case <-deadline:
			cancel()
		case <-time.After(100 * time.Millisecond):
			if done(out.String()) {
				cancel()
			}
		}
	}
}

func (e *env) must(args ...string) result {
	e.t.Helper()
	r := e.gc(args...)
	if r.code != 0 {
		e.t.Fatalf("gcompose %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (e *env) read(name string) string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.files, name))
	if err != nil {
		e.t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

func (e *env) exists(name string) bool {
	_, err := os.Stat(filepath.Join(e.files, name))
	return err == nil
}

func (e *env) assertNoContainers() {
	e.t.Helper()
	ids := testimage.ContainersLabelled(e.t, context.Background(), "gcompose.app", e.app)
	if len(ids) > 0 {
		e.t.Errorf("containers of %s left behind: %v", e.app, ids)
	}
}

// dag: d depends on b and c; b reads a's output; c depends on a explicitly.
// b and c sleep so that their overlap shows.
const dag = `
meta:
  name: APP
plugs:
  files:
    path: ./out
resources:
  a:
    type: IMAGE
    config: {path: a.txt, content: "alpha-CONTENT"}
  b:
    type: IMAGE
    config: {path: b.txt, content: "a is ${resources.a.state.sha256}", delay_ms: 1500}
  c:
    type: IMAGE
    dependencies: {first: a}
    config: {path: c.txt, content: "gamma", delay_ms: 1500}
  d:
    type: IMAGE
    dependencies: {x: b, y: c}
    config: {path: d.txt, content: "delta"}
`

type event struct {
	Type     string    `json:"type"`
	Time     time.Time `json:"time"`
	Resource string    `json:"resource"`
	Phase    string    `json:"phase"`
	Message  string    `json:"message"`
}

func events(t *testing.T, out string) []event {
	var evs []event
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var ev event
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "event" {
			evs = append(evs, ev)
		}
	}
	return evs
}

// span returns when a resource's first action started and its last ended.
func span(evs []event, res string) (start, end time.Time) {
	for _, ev := range evs {
		if ev.Resource != res {
			continue
		}
		if ev.Phase == "action" && start.IsZero() {
			start = ev.Time
		}
		if ev.Phase == "action-done" {
			end = ev.Time
		}
	}
	return
}

func TestE2EDeployRedeployUpdateDestroy(t *testing.T) {
	e := newEnv(t)
	f := e.write("app.yaml", strings.ReplaceAll(dag, "CONTENT", "1"))

	plan := e.gc("plan", f, "--detailed-exitcode")
	if plan.code != exitChanges || !strings.Contains(plan.stdout, "Plan: 4 to create") {
		t.Fatalf("plan: exit %d, want 2 with 4 creates:\n%s%s", plan.code, plan.stdout, plan.stderr)
	}
	if !strings.Contains(plan.stdout, "known after apply") {
		t.Fatalf("plan does not show b's input as known after apply:\n%s", plan.stdout)
	}

	r := e.must("deploy", f, "--yes", "--json")
	evs := events(t, r.stderr)
	aStart, aEnd := span(evs, "resources.a")
	bStart, bEnd := span(evs, "resources.b")
	cStart, cEnd := span(evs, "resources.c")
	dStart, _ := span(evs, "resources.d")
	if aStart.IsZero() || bStart.IsZero() || cStart.IsZero() || dStart.IsZero() {
		t.Fatalf("missing action events:\n%s", r.stderr)
	}
	if bStart.Before(aEnd) || cStart.Before(aEnd) || dStart.Before(bEnd) || dStart.Before(cEnd) {
		t.Fatalf("dependency order violated: a %v-%v b %v-%v c %v-%v d %v", aStart, aEnd, bStart, bEnd, cStart, cEnd, dStart)
	}
	if !(bStart.Before(cEnd) && cStart.Before(bEnd)) {
		t.Fatalf("independent b and c did not overlap: b %v-%v c %v-%v", bStart, bEnd, cStart, cEnd)
	}
	// b's content is a's sha256 as the file adapter reports it: the sum of
	// a.txt. A prefix check would also pass an unresolved ${...}.
	if got, want := e.read("b.txt"), "a is "+sha256Hex(e.read("a.txt")); got != want {
		t.Fatalf("b.txt = %q, want %q (a's sha256 resolved in)", got, want)
	}

	// Re-deploy: nothing to do, no action runs.
	r = e.must("deploy", f, "--yes")
	if !strings.Contains(r.stdout, "Nothing to do") || strings.Contains(r.stderr, " action ") {
		t.Fatalf("re-deploy was not a no-op:\n%s\n%s", r.stdout, r.stderr)
	}
	if p := e.gc("plan", f, "--detailed-exitcode"); p.code != exitOK {
		t.Fatalf("plan after deploy: exit %d, want 0\n%s", p.code, p.stdout)
	}

	// A config change: a is updated, b (which reads a's output) follows; c and d stay.
	bBefore := e.read("b.txt")
	f = e.write("app.yaml", strings.ReplaceAll(dag, "CONTENT", "2"))
	p := e.gc("plan", f)
	for _, want := range []string{"~ update    resources.a", "knock-on"} {
		if !strings.Contains(p.stdout, want) {
			t.Fatalf("plan after change lacks %q:\n%s", want, p.stdout)
		}
	}
	r = e.must("deploy", f, "--yes", "--json")
	evs = events(t, r.stderr)
	touched := map[string]bool{}
	for _, ev := range evs {
		if ev.Phase == "action" {
			touched[ev.Resource] = true
		}
	}
	if !touched["resources.a"] || !touched["resources.b"] || touched["resources.c"] || touched["resources.d"] {
		t.Fatalf("update touched %v, want exactly a and b", touched)
	}
	if e.read("a.txt") != "alpha-2" || e.read("b.txt") == bBefore {
		t.Fatalf("files not updated: a=%q b=%q", e.read("a.txt"), e.read("b.txt"))
	}
	if got, want := e.read("b.txt"), "a is "+sha256Hex("alpha-2"); got != want {
		t.Fatalf("b.txt after the update = %q, want %q", got, want)
	}

	// state list / show.
	ls := e.must("state", "list", "--app", e.app)
	for _, n := range []string{"resources.a", "resources.d", "Active"} {
		if !strings.Contains(ls.stdout, n) {
			t.Fatalf("state list lacks %s:\n%s", n, ls.stdout)
		}
	}
	show := e.must("state", "show", "resources.a", "--app", e.app)
	if !strings.Contains(show.stdout, `"sha256"`) {
		t.Fatalf("state show lacks outputs:\n%s", show.stdout)
	}

	// Destroy removes everything, dependents first, and the state empties.
	r = e.must("destroy", f, "--yes")
	for _, n := range []string{"a.txt", "b.txt", "c.txt", "d.txt"} {
		if e.exists(n) {
			t.Fatalf("%s survived destroy", n)
		}
	}
	ls = e.must("state", "list", "--app", e.app)
	if strings.Contains(ls.stdout, "resources.") {
		t.Fatalf("state not empty after destroy:\n%s", ls.stdout)
	}
}

func TestE2EConfirmationNeedsTerminalOrYes(t *testing.T) {
	e := newEnv(t)
	f := e.write("app.yaml", strings.ReplaceAll(dag, "CONTENT", "1"))
	r := e.gc("deploy", f)
	if r.code != exitError || !strings.Contains(r.stderr, "--yes") {
		t.Fatalf("deploy without a terminal: exit %d, want 1 asking for --yes\n%s", r.code, r.stderr)
	}
	if e.exists("a.txt") {
		t.Fatal("deploy changed something without confirmation")
	}
}

// gcomposeBinary is the CLI built for the tests that run it as a process
// (crash, lock, interrupt, tmux), once per test binary run.
func gcomposeBinary(t *testing.T) string {
	t.Helper()
	return testimage.Binary(t, context.Background(), "./cmd/gcompose")
}

func (e *env) start(args ...string) (*exec.Cmd, *bytes.Buffer) {
	e.t.Helper()
	cmd := exec.Command(gcomposeBinary(e.t), append(args, "--state", e.state)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	return cmd, &out
}

// chain is n resources in a line, each with an action that takes a while.
func chain(n int) string {
	var b strings.Builder
	b.WriteString("meta:\n  name: APP\nplugs:\n  files:\n    path: ./out\nresources:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  r%d:\n    type: IMAGE\n    config: {path: r%d.txt, content: \"%d\", delay_ms: 300, journal: .file-adapter.log}\n", i, i, i)
		if i > 0 {
			fmt.Fprintf(&b, "    dependencies: {prev: r%d}\n", i-1)
		}
	}
	return b.String()
}

// TestE2EKillDuringDeployConverges SIGKILLs a deploy of a chain of six
// twice, each time the moment the adapter has created a given file (r1, then
// r3), and shows the kill landed mid-deploy: the resources before it are
// Active in the state, the one just created is Active or pending, the last
// is not done. Then a deploy converges, creating each file once.
func TestE2EKillDuringDeployConverges(t *testing.T) {
	e := newEnv(t)
	f := e.write("app.yaml", chain(6))
	journal := filepath.Join(e.files, ".file-adapter.log")
	for _, at := range []int{1, 3} {
		cmd, out := e.start("deploy", f, "--yes")
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		line := fmt.Sprintf("create r%d.txt\n", at)
		deadline := time.Now().Add(2 * time.Minute)
		for {
			b, _ := os.ReadFile(journal)
			if strings.Contains(string(b), line) {
				break
			}
			select {
			case err := <-exited:
				t.Fatalf("the deploy ended (%v) before the adapter created r%d.txt:\n%s", err, at, out.String())
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				<-exited
				t.Fatalf("r%d.txt not created in 2 minutes:\n%s", at, out.String())
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		t.Logf("killed once r%d.txt was created; output so far:\n%s", at, out.String())
		checkKilledMidDeploy(t, e, at, 6)
	}
	r := e.must("deploy", f, "--yes")
	for i := 0; i < 6; i++ {
		if got := e.read(fmt.Sprintf("r%d.txt", i)); got != fmt.Sprint(i) {
			t.Fatalf("r%d.txt = %q after recovery", i, got)
		}
	}
	log := e.read(".file-adapter.log")
	for i := 0; i < 6; i++ {
		if n := strings.Count(log, fmt.Sprintf("create r%d.txt\n", i)); n != 1 {
			t.Fatalf("r%d.txt created %d times (adapter log:\n%s)\nlast deploy:\n%s", i, n, log, r.stdout+r.stderr)
		}
	}
	if r := e.must("deploy", f, "--yes"); !strings.Contains(r.stdout, "Nothing to do") {
		t.Fatalf("not converged after recovery:\n%s", r.stdout)
	}
	e.must("destroy", f, "--yes")
}

// checkKilledMidDeploy reads the state a killed deploy of chain(n) left:
// r0..r(at-1) Active, r(at) Active or with its create pending (the kill came
// right after the adapter wrote its file), the last not Active.
func checkKilledMidDeploy(t *testing.T, e *env, at, n int) {
	t.Helper()
	st, err := state.NewFileStore(e.state, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	doc, err := st.Load(context.Background(), e.app)
	if err != nil {
		t.Fatalf("state after the kill: %v", err)
	}
	var seen []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("resources.r%d", i)
		r := doc.Resources[name]
		switch {
		case r == nil:
			seen = append(seen, name+" absent")
		case r.Pending != nil:
			seen = append(seen, fmt.Sprintf("%s %s, %s pending", name, r.Status, r.Pending.Kind))
		default:
			seen = append(seen, fmt.Sprintf("%s %s", name, r.Status))
		}
		active := r != nil && r.Status == state.StatusActive && r.Pending == nil
		switch {
		case i < at && !active:
			t.Errorf("%s was done before the kill but is not Active", name)
		case i == at && !active && (r == nil || r.Pending == nil):
			t.Errorf("%s: its file was created before the kill, yet the state records neither it nor its pending create", name)
		case i == n-1 && active:
			t.Errorf("%s is Active: the kill did not land mid-deploy", name)
		}
	}
	t.Logf("state after the kill: %s", strings.Join(seen, "; "))
}

func TestE2EConcurrentDeployIsRefusedByTheLock(t *testing.T) {
	e := newEnv(t)
	f := e.write("app.yaml", chain(3))
	cmd, out := e.start("deploy", f, "--yes")
	defer cmd.Wait()
	// Wait until the first deploy holds the lock.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(e.state, e.app+".lock")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("first deploy never took the lock:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := e.gc("deploy", f, "--yes")
	if r.code != exitError || !strings.Contains(r.stderr, "is locked by") || !strings.Contains(r.stderr, "releases it the moment the process ends") {
		t.Fatalf("second deploy: exit %d, want a lock error\n%s", r.code, r.stderr)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("first deploy failed: %v\n%s", err, out.String())
	}
	// With --lock-timeout a waiting deploy gets through once the lock is free.
	e.must("destroy", f, "--yes", "--lock-timeout", "30s")
}

// The state backend comes from --state, else GCOMPOSE_STATE, else the config
// file (.gcompose/config.yaml or $GCOMPOSE_CONFIG), else .gcompose/state.
func TestStateFromConfigFile(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte("state: "+filepath.Join(dir, "from-config")+"\n"), 0o644)
	t.Setenv("GCOMPOSE_CONFIG", cfg)
	t.Setenv("GCOMPOSE_STATE", "")
	os.Unsetenv("GCOMPOSE_STATE")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"gcompose", "state", "list"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("state list with a config file: exit %d: %s", code, errb.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "from-config")); err != nil {
		t.Fatalf("the config file's state directory was not used: %v", err)
	}
	os.WriteFile(cfg, []byte("stat: x\n"), 0o644)
	errb.Reset()
	if code := run(context.Background(), []string{"gcompose", "state", "list"}, strings.NewReader(""), &out, &errb); code == 0 || !strings.Contains(errb.String(), "stat") {
		t.Fatalf("an unknown key in the config file: exit %d, %q; want an error naming it", code, errb.String())
	}
}

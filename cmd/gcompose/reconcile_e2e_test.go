package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gcompose/gcompose/cmd/gcompose/internal/progress"
	"github.com/gcompose/gcompose/core/secret"
	"github.com/gcompose/gcompose/internal/syncwriter"
	"github.com/gcompose/gcompose/schemas"
)

// reconcileApp: b reads a's checksum; other depends on nothing.
const reconcileApp = `
meta:
  name: APP
plugs:
  files:
    path: ./out
resources:
  a:
    type: IMAGE
    config: {path: a.txt, content: "alpha"}
  b:
    type: IMAGE
    config: {path: b.txt, content: "a is ${resources.a.state.sha256}"}
  other:
    type: IMAGE
    config: {path: other.txt, content: "OTHER"}
`

// knownPhase is schemas/events.schema.json's list of the phases of v1.
var knownPhase = sync.OnceValues(func() (*jsonschema.Schema, error) {
	raw, err := schemas.FS.ReadFile("events.schema.json")
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	const id = "https://gcompose.dev/schemas/events.schema.json"
	c := jsonschema.NewCompiler()
	if err := c.AddResource(id, doc); err != nil {
		return nil, err
	}
	return c.Compile(id + "#/$defs/knownPhase")
})

// reconcileEvents parses reconcile's JSON stream and checks every line
// against schemas/events.schema.json: an event, of a phase it lists.
func reconcileEvents(t *testing.T, stdout string) []progress.Event {
	t.Helper()
	phases, err := knownPhase()
	if err != nil {
		t.Fatal(err)
	}
	var out []progress.Event
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if line == "" {
			continue
		}
		if err := progress.ValidateLine([]byte(line)); err != nil {
			t.Fatalf("event %s does not match schemas/events.schema.json: %v", line, err)
		}
		var ev progress.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != "event" {
			t.Fatalf("reconcile wrote a %s, not an event: %s", ev.Type, line)
		}
		if err := phases.Validate(ev.Phase); err != nil {
			t.Fatalf("event %s: its phase is not among schemas/events.schema.json's $defs/knownPhase: %v", line, err)
		}
		out = append(out, ev)
	}
	return out
}

func phasesOf(evs []progress.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Resource == "" || ev.Phase == "drift" {
			out = append(out, ev.Phase)
		}
	}
	return out
}

// TestE2EReconcileCLI runs gcompose reconcile --cycles 1 on a file-adapter
// app with the file state: a file deleted behind gcompose's back is made
// again with its knock-on and nothing else; a descriptor edited and not
// deployed stops every repair (exit 1, saying why); a healthy app exits 0.
func TestE2EReconcileCLI(t *testing.T) {
	e := newEnv(t)
	f := e.write("app.yaml", strings.ReplaceAll(reconcileApp, "OTHER", "omega"))
	e.must("deploy", f, "--yes")
	reconcile := func(args ...string) result {
		t.Helper()
		return e.gc(append([]string{"reconcile", f, "--cycles", "1", "--interval", "100ms", "--listen", "", "--json"}, args...)...)
	}

	r := reconcile()
	if r.code != 0 || len(reconcileEvents(t, r.stdout)) != 2 { // leading, no longer leading
		t.Fatalf("healthy: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "the state is not in etcd: this reconciler leads alone") {
		t.Fatalf("no warning about running alone:\n%s", r.stderr)
	}

	otherBefore, err := os.Stat(filepath.Join(e.files, "other.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(e.files, "a.txt")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // a rewrite of other.txt would show in its mtime
	r = reconcile()
	evs := reconcileEvents(t, r.stdout)
	if r.code != 0 || strings.Join(phasesOf(evs), " ") != "leader drift repair repaired leader" {
		t.Fatalf("repair: exit %d, phases %v\nstdout:\n%s\nstderr:\n%s", r.code, phasesOf(evs), r.stdout, r.stderr)
	}
	for _, ev := range evs {
		if ev.Phase == "repair" && !strings.Contains(ev.Message, "knock-ons: resources.b") {
			t.Fatalf("repair event: %s", ev.Message)
		}
		if ev.Phase == "repaired" && (ev.DurationMS == nil || !strings.Contains(ev.Message, "create resources.a")) {
			t.Fatalf("repaired event: %+v", ev)
		}
	}
	if got := e.read("a.txt"); got != "alpha" {
		t.Fatalf("a.txt after the repair: %q", got)
	}
	if otherAfter, err := os.Stat(filepath.Join(e.files, "other.txt")); err != nil || !otherAfter.ModTime().Equal(otherBefore.ModTime()) {
		t.Fatalf("other.txt, which did not drift, was written again (%v)", err)
	}
	if !strings.Contains(r.stderr, "msg=\"repaired resources.a") {
		t.Fatalf("no log line for the repair:\n%s", r.stderr)
	}

	// Edited, not deployed: nothing is repaired.
	f = e.write("app.yaml", strings.ReplaceAll(reconcileApp, "OTHER", "changed"))
	if err := os.Remove(filepath.Join(e.files, "a.txt")); err != nil {
		t.Fatal(err)
	}
	r = reconcile()
	if r.code != 1 || !strings.Contains(r.stderr, "resources.other: its config differs from the one deployed (content)") || e.exists("a.txt") {
		t.Fatalf("undeployed change: exit %d, a.txt exists %v\nstdout:\n%s\nstderr:\n%s", r.code, e.exists("a.txt"), r.stdout, r.stderr)
	}
	evs = reconcileEvents(t, r.stdout)
	if p := strings.Join(phasesOf(evs), " "); p != "leader drift intent leader" {
		t.Fatalf("undeployed change: phases %s", p)
	}
	if got := e.read("other.txt"); got != "omega" {
		t.Fatalf("other.txt = %q: the change was applied", got)
	}
}

// TestE2EReconcileRefusesBadInput: every flag and state a user can get
// wrong is refused with the flag (or the state) named, before anything is
// written, and the deployed application is as it was.
func TestE2EReconcileRefusesBadInput(t *testing.T) {
	e := newEnv(t)
	f := e.write("app.yaml", reconcileApp)
	before := func() string {
		b, err := os.ReadFile(filepath.Join(e.state, e.app+".json"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	reconcile := func(args ...string) result {
		t.Helper()
		return e.gc(append([]string{"reconcile", f, "--listen", ""}, args...)...)
	}

	// Nothing deployed yet.
	r := reconcile("--cycles", "1")
	if r.code != 1 || !strings.Contains(r.stderr, "nothing of "+e.app+" is deployed in the state "+e.state+": gcompose reconcile keeps a deployed application running and deploys nothing itself; deploy it first (gcompose deploy)") {
		t.Fatalf("nothing deployed: exit %d\n%s", r.code, r.stderr)
	}

	e.must("deploy", f, "--yes")
	doc := before()
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--interval", "0"}, nil, "--interval 0s: must be above 0"},
		{[]string{"--interval", "-1s"}, nil, "--interval -1s: must be above 0"},
		{nil, map[string]string{"GCOMPOSE_RECONCILE_INTERVAL": "0s"}, "--interval ($GCOMPOSE_RECONCILE_INTERVAL) 0s: must be above 0"},
		{[]string{"--interval", "1m", "--max-backoff", "30s"}, nil, "--max-backoff 30s: must be at least --interval 1m0s"},
		{[]string{"--grace", "0"}, nil, "--grace 0s: must be above 0"},
		{[]string{"--cycles", "-1"}, nil, "--cycles -1: must be 0 (run until stopped) or more"},
		{[]string{"--leader-ttl", "500ms"}, nil, "--leader-ttl 500ms: must be at least 1s"},
		{[]string{"--max-glm-per-hour", "-1"}, nil, "--max-glm-per-hour -1: must be an amount of 0 or more, in the currency the adapters report (0: the descriptor's budget, if any)"},
		{[]string{"--max-glm-total", "NaN"}, nil, "--max-glm-total NaN: must be an amount of 0 or more, in the currency the adapters report (0: the descriptor's budget, if any)"},
		{nil, map[string]string{"GCOMPOSE_MAX_GLM_TOTAL": "-2"}, "--max-glm-total ($GCOMPOSE_MAX_GLM_TOTAL) -2: must be an amount of 0 or more, in the currency the adapters report (0: the descriptor's budget, if any)"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			r := reconcile(append([]string{"--cycles", "1"}, tc.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, want %d and %q\n%s", r.code, exitUsage, tc.want, r.stderr)
			}
			if strings.Contains(r.stderr, "leading") {
				t.Fatalf("it ran before refusing:\n%s", r.stderr)
			}
		})
	}
	// The descriptor's own tests hold every message (core/descriptor
	// testdata/cases/budget-*); this is what a person running reconcile
	// sees of one: the file, line and column, the value and what is
	// accepted, and nothing else of the schema.
	const accepted = `is not an amount above 0 (in the adapters' currency): write a number such as 2 or 0.5, or a decimal string such as "0.5"; leave the key out for no limit`
	for _, tc := range []struct{ budget, want string }{
		{"per_hour: -1", "bad.yaml:17:20: budget.per_hour: -1 " + accepted},
		{`per_hour: "abc"`, `bad.yaml:17:20: budget.per_hour: "abc" ` + accepted},
		{"total: 0", "bad.yaml:17:17: budget.total: 0 " + accepted},
	} {
		t.Run(tc.budget, func(t *testing.T) {
			bad := e.write("bad.yaml", reconcileApp+"budget: {"+tc.budget+"}\n")
			r := e.gc("reconcile", bad, "--listen", "", "--cycles", "1")
			if r.code == 0 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "must be") || strings.Contains(r.stderr, "pattern") {
				t.Fatalf("exit %d, want %q alone\n%s", r.code, tc.want, r.stderr)
			}
		})
	}
	if got := before(); got != doc {
		t.Fatal("refused runs changed the state")
	}

	// A second reconciler on one file state.
	first := exec.Command(gcomposeBinary(t), "reconcile", f, "--listen", "", "--interval", "1s", "--state", e.state)
	var firstErr syncwriter.Buffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Process.Kill(); _ = first.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(firstErr.String(), "leading") {
		if time.Now().After(deadline) {
			t.Fatalf("the first reconciler does not lead:\n%s", firstErr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	r = reconcile("--cycles", "1")
	if r.code != 1 || !strings.Contains(r.stderr, "another reconciler keeps "+e.app+" running on the state "+e.state+" (pid "+strconv.Itoa(first.Process.Pid)) {
		t.Fatalf("second reconciler: exit %d\n%s", r.code, r.stderr)
	}
	_ = first.Process.Signal(syscall.SIGTERM)
	if err := first.Wait(); err != nil {
		t.Fatalf("the first reconciler, stopped: %v\n%s", err, firstErr.String())
	}
	// Stopped, it lets the next one lead.
	if r := reconcile("--cycles", "1"); r.code != 0 {
		t.Fatalf("after the first stopped: exit %d\n%s", r.code, r.stderr)
	}
}

// TestE2EReconcileInterruptedMidRepair: Ctrl-C while a repair's create
// runs lets it finish, starts nothing more, says the repair was cut short
// (not failed), exits 0; the next run finds the state as the first left it
// and finishes the repair.
func TestE2EReconcileInterruptedMidRepair(t *testing.T) {
	e := newEnv(t)
	slow := strings.Replace(reconcileApp, `config: {path: a.txt, content: "alpha"}`, `config: {path: a.txt, content: "alpha", delay_ms: 1500}`, 1)
	f := e.write("app.yaml", slow)
	e.must("deploy", f, "--yes")
	if err := os.Remove(filepath.Join(e.files, "a.txt")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gcomposeBinary(t), "reconcile", f, "--listen", "", "--interval", "200ms", "--json", "--state", e.state)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncwriter.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var lines bytes.Buffer
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		lines.WriteString(sc.Text() + "\n")
		var ev progress.Event
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Phase == "action" && ev.Resource == "resources.a" {
			_ = cmd.Process.Signal(syscall.SIGINT)
		}
	}
	err = cmd.Wait()
	evs := reconcileEvents(t, lines.String())
	if err != nil || strings.Join(phasesOf(evs), " ") != "leader drift repair interrupt repair-stopped leader" {
		t.Fatalf("interrupted mid-repair: %v, phases %v\nstdout:\n%s\nstderr:\n%s", err, phasesOf(evs), lines.String(), stderr.String())
	}
	for _, ev := range evs {
		if ev.Phase == "repair-stopped" && (ev.Level != progress.Warn || !strings.Contains(ev.Message, "the next leader or run finishes it") || !strings.Contains(ev.Message, "resources.b")) {
			t.Fatalf("repair-stopped event: %+v", ev)
		}
	}
	if got := e.read("a.txt"); got != "alpha" {
		t.Fatalf("a.txt, whose create was under way: %q", got)
	}
	r := e.gc("reconcile", f, "--listen", "", "--cycles", "1", "--interval", "100ms", "--json")
	if evs := reconcileEvents(t, r.stdout); r.code != 0 || strings.Join(phasesOf(evs), " ") != "leader leader" {
		t.Fatalf("the next run: exit %d, phases %v\n%s", r.code, phasesOf(evs), r.stderr)
	}
	if ps := e.must("ps", "-f", f); strings.Count(ps.stdout, "Active") != 3 {
		t.Fatalf("after the next run:\n%s", ps.stdout)
	}
}

// TestE2EReconcileServesNoSecret: what the reconciler serves over HTTP
// goes through the run's redactor, as its stdout and stderr do. Resource a
// keeps its file under a directory named after a secret; the repair of a
// deleted a.txt fails (its temporary file's place is taken by a directory)
// with an error quoting the path. /healthz shows that error, /metrics the
// failure, and neither shows the secret in any of its forms.
func TestE2EReconcileServesNoSecret(t *testing.T) {
	e := newEnv(t)
	token := `tok<&>"` + randomSecret("")
	t.Setenv("E2E_RECONCILE_TOKEN", token)
	t.Setenv(secret.EnvKey, "")
	t.Setenv(secret.EnvKeyFile, "")
	t.Setenv(secret.EnvPassphrase, "reconcile serves no secret")
	app := strings.Replace(reconcileApp, "meta:", "secrets:\n  tok: {env: E2E_RECONCILE_TOKEN}\nmeta:", 1)
	app = strings.Replace(app, "config: {path: a.txt,", `config: {path: "d-${secret.tok}/a.txt",`, 1)
	f := e.write("app.yaml", app)
	e.must("deploy", f, "--yes")
	dir := filepath.Join(e.files, "d-"+token)
	if err := os.Remove(filepath.Join(dir, "a.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, ".gcompose-a.txt.tmp"), 0o755); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(gcomposeBinary(t), "reconcile", f, "--listen", "127.0.0.1:0", "--interval", "200ms", "--max-backoff", "400ms", "--state", e.state)
	var stderr syncwriter.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := regexp.MustCompile(`msg="serving /metrics and /healthz" address=(http://\S+)`)
	var base string
	deadline := time.Now().Add(30 * time.Second)
	for base == "" {
		if m := addr.FindStringSubmatch(stderr.String()); m != nil {
			base = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no address served:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	get := func(path string) string {
		t.Helper()
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var health struct {
		LastOutcome string `json:"last_outcome"`
		LastError   string `json:"last_error"`
	}
	var healthz string
	for health.LastOutcome != "failed" {
		if time.Now().After(deadline) {
			t.Fatalf("no failed repair in time: /healthz %s\nstderr:\n%s", healthz, stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
		healthz = get("/healthz")
		if err := json.Unmarshal([]byte(healthz), &health); err != nil {
			t.Fatalf("/healthz: %v\n%s", err, healthz)
		}
	}
	metrics := get("/metrics")
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("stopped: %v\n%s", err, stderr.String())
	}
	// The error quotes the path: masked, it shows where the secret was.
	if !strings.Contains(health.LastError, "d-"+secret.Mask+"/.gcompose-a.txt.tmp") {
		t.Fatalf("/healthz's last_error does not quote the masked path: %s", healthz)
	}
	if !regexp.MustCompile(`gcompose_reconcile_failures_total\{app="` + e.app + `",stage="repair"\} [1-9]`).MatchString(metrics) {
		t.Fatalf("/metrics counts no failed repair:\n%s", metrics)
	}
	for what, text := range map[string]string{"/healthz": healthz, "/metrics": metrics, "stderr": stderr.String()} {
		for _, form := range secret.Forms(token) {
			if strings.Contains(text, form) {
				t.Errorf("%s shows the secret (as %s):\n%s", what, form, text)
			}
		}
	}
}

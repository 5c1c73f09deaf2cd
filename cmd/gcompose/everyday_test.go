package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/cmd/gcompose/internal/progress"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/testimage"
)

// gcIn runs the CLI in-process with a state directory.
func gcIn(t *testing.T, stateDir string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	full := append(append([]string{"gcompose"}, args...), "--state", stateDir)
	code := run(context.Background(), full, strings.NewReader(""), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// seedState writes a state document with the resources given.
func seedState(t *testing.T, dir, app string, rs ...*state.Resource) {
	t.Helper()
	st, err := state.NewFileStore(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	l, err := st.Lock(ctx, app, state.LockInfo{Operation: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Unlock(ctx, l)
	var ch []state.Change
	for _, r := range rs {
		ch = append(ch, state.Put(r))
	}
	if err := st.Apply(ctx, l, ch...); err != nil {
		t.Fatal(err)
	}
}

func TestLogsReadsStateLogs(t *testing.T) {
	dir := t.TempDir()
	seedState(t, dir, "shop",
		&state.Resource{Name: "services.web[0]", Type: "gcompose/golem-service:dev", Status: state.StatusActive, State: map[string]any{
			"logs": []any{
				map[string]any{"source": "init[0]", "command": "echo hi", "stdout": "hi\n", "exit_code": 0},
				map[string]any{"source": "init[1]", "command": "false", "stderr": "boom\n", "exit_code": 1},
			}}},
		&state.Resource{Name: "services.db", Type: "gcompose/golem-service:dev", Status: state.StatusActive, State: map[string]any{"logs": "db ready\n"}},
		&state.Resource{Name: "resources.file", Type: "gcompose/file-adapter:dev", Status: state.StatusActive, State: map[string]any{"sha256": "x"}},
	)
	for _, tc := range []struct {
		args      []string
		want, not []string
		code      int
	}{
		{[]string{"logs", "--app", "shop"}, []string{
			"==> services.web[0] init[0] echo hi (exit 0)", "services.web[0] | stdout: hi",
			"==> services.web[0] init[1] false (exit 1)", "services.web[0] | stderr: boom",
			"services.db | stdout: db ready",
			"resources.file: no logs (its adapter, gcompose/file-adapter:dev, reports none)"}, nil, 0},
		{[]string{"logs", "--app", "shop", "web"}, []string{"services.web[0] | stdout: hi"}, []string{"services.db", "resources.file"}, 0},
		{[]string{"logs", "--app", "shop", "services.db"}, []string{"services.db | stdout: db ready"}, []string{"web"}, 0},
		{[]string{"logs", "--app", "shop", "nosuch"}, nil, nil, exitError},
	} {
		r := gcIn(t, dir, tc.args...)
		if r.code != tc.code {
			t.Errorf("%v: exit %d, want %d\n%s%s", tc.args, r.code, tc.code, r.stdout, r.stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, r.stdout)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(r.stdout, n) {
				t.Errorf("%v: output has %q:\n%s", tc.args, n, r.stdout)
			}
		}
	}
}

func TestGraphDeployedAndDiffFromState(t *testing.T) {
	dir, prod := filepath.Join(t.TempDir(), "staging"), filepath.Join(t.TempDir(), "prod")
	a := &state.Resource{Name: "resources.a", Type: "file", Status: state.StatusActive, Config: map[string]any{"content": "1"}}
	b := &state.Resource{Name: "resources.b", Type: "file", Status: state.StatusPending, Dependencies: []string{"resources.a"}}
	seedState(t, dir, "shop", a, b)
	a2 := a.Clone()
	a2.Config["content"] = "2"
	seedState(t, prod, "shop", a2, &state.Resource{Name: "resources.c", Type: "file", Status: state.StatusActive})

	r := gcIn(t, dir, "graph", "--deployed", "--app", "shop", "--format", "json")
	var g struct {
		Vertices []struct {
			ID    string         `json:"id"`
			Attrs map[string]any `json:"attributes"`
		} `json:"vertices"`
		Edges []struct{ From, To, Kind string } `json:"edges"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &g) != nil {
		t.Fatalf("graph --deployed: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if len(g.Vertices) != 2 || g.Vertices[1].Attrs["status"] != "Pending" || len(g.Edges) != 1 || g.Edges[0].Kind != "recorded" || g.Edges[0].From != "resources.b" {
		t.Errorf("deployed graph: %+v", g)
	}
	if r := gcIn(t, dir, "graph", "--deployed", "--app", "shop", "--format", "mermaid"); !strings.Contains(r.stdout, `["resources.b (Pending)"]`) {
		t.Errorf("mermaid:\n%s", r.stdout)
	}
	if r := gcIn(t, dir, "graph", "--deployed", "--app", "empty"); r.code != exitError {
		t.Errorf("graph of nothing deployed: exit %d", r.code)
	}

	r = gcIn(t, dir, "diff", "--from", "state:"+dir+"#shop", "--to", "state:"+prod+"#shop", "--exit-code")
	for _, w := range []string{`~ /config/content: "1" -> "2"`, "- resources.b", "+ resources.c", "Diff: 1 added, 1 removed, 1 changed, 0 unchanged."} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("diff lacks %q:\n%s%s", w, r.stdout, r.stderr)
		}
	}
	if r.code != exitChanges {
		t.Errorf("diff --exit-code with changes: exit %d, want 2", r.code)
	}
	// Two state files, JSON.
	r = gcIn(t, dir, "diff", "--from", filepath.Join(dir, "shop.json"), "--to", filepath.Join(prod, "shop.json"), "--json")
	var res struct {
		Resources []struct {
			Resource string
			Op       string
			Changes  []struct{ Op, Path string }
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || len(res.Resources) != 3 || res.Resources[0].Changes[0].Path != "/config/content" {
		t.Errorf("diff --json: %v %+v\n%s%s", err, res, r.stdout, r.stderr)
	}
	// The same state on both sides.
	if r := gcIn(t, dir, "diff", "--from", "state:"+dir+"#shop", "--to", "state:"+dir+"#shop", "--exit-code"); r.code != 0 || !strings.Contains(r.stdout, "No differences") {
		t.Errorf("self diff: exit %d\n%s", r.code, r.stdout)
	}
}

// gcPlain runs the CLI in-process with exactly these arguments.
func gcPlain(args ...string) result {
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"gcompose"}, args...), strings.NewReader(""), &out, &errb)
	return result{code, out.String(), errb.String()}
}

func TestCompletionAndVersion(t *testing.T) {
	for shell, want := range map[string]string{"bash": "complete -F _gcompose_complete gcompose", "zsh": "bashcompinit", "fish": "complete -c gcompose"} {
		if r := gcPlain("completion", shell); r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("completion %s: exit %d, lacks %q", shell, r.code, want)
		}
	}
	if r := gcPlain("completion", "tcsh"); r.code != exitUsage {
		t.Errorf("completion tcsh: exit %d, want %d", r.code, exitUsage)
	}
	// urfave/cli reads os.Args to tell a command from a flag completion.
	saved := os.Args
	os.Args = []string{"gcompose", "--generate-bash-completion"}
	out := gcPlain("--generate-bash-completion").stdout
	os.Args = saved
	for _, c := range []string{"deploy", "diff", "logs", "completion"} {
		if !strings.Contains(out, c+"\n") {
			t.Errorf("bash completion candidates lack %s:\n%s", c, out)
		}
	}
	if r := gcPlain("version"); !strings.HasPrefix(r.stdout, "gcompose version "+version+" (commit ") {
		t.Errorf("version: %q", r.stdout)
	}
}

// TestJSONStreamOfARealDeploy validates every line a real deploy and
// destroy print with --json against schemas/events.schema.json.
func TestJSONStreamOfARealDeploy(t *testing.T) {
	e := newEnv(t)
	f := e.write("app.yaml", `
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
`)
	for _, cmd := range []string{"deploy", "destroy"} {
		r := e.must(cmd, f, "--yes", "--json")
		n, phases := 0, map[string]bool{}
		sc := bufio.NewScanner(strings.NewReader(r.stderr))
		var last string
		for sc.Scan() {
			n++
			last = sc.Text()
			if err := progress.ValidateLine(sc.Bytes()); err != nil {
				t.Errorf("%s: stderr line %d: %v\n%s", cmd, n, err, sc.Text())
			}
			var ev progress.Event
			json.Unmarshal(sc.Bytes(), &ev)
			phases[ev.Phase] = true
		}
		if !phases["action"] || !phases["done"] {
			t.Errorf("%s: phases %v", cmd, phases)
		}
		if strings.TrimSpace(r.stdout) != last {
			t.Errorf("%s: stdout is not the stream's summary:\nstdout %s\nlast   %s", cmd, r.stdout, last)
		}
		sum := lastSummary(t, r.stdout)
		if sum.Command != cmd || !sum.OK || sum.Counts.Changed != 2 || len(sum.Resources) != 2 {
			t.Errorf("%s summary: %+v", cmd, sum)
		}
	}
	// plan --json is the plan document alone, for tools that parse stdout
	// and stderr together.
	if r := e.must("plan", f, "--json"); r.stderr != "" || !json.Valid([]byte(r.stdout)) {
		t.Errorf("plan --json: stderr %q, stdout valid JSON %v", r.stderr, json.Valid([]byte(r.stdout)))
	}
}

// TestE2ELogsFromAnAdapter deploys a resource whose adapter reports command
// output in its state (testdata/logs-adapter), reads it with logs, and
// follows it: every state call reports a new "poll" entry.
func TestE2ELogsFromAnAdapter(t *testing.T) {
	e := newEnv(t)
	image := testimage.Image(t, context.Background(), "./cmd/gcompose/testdata/logs-adapter", "gcompose-test/logs-adapter:e2e")
	f := e.write("app.yaml", strings.ReplaceAll(`
meta:
  name: APP
resources:
  web:
    type: LOGS
    config: {message: hello-from-init}
`, "LOGS", image))
	e.must("deploy", f, "--yes")
	r := e.must("logs", "--file", f)
	for _, w := range []string{"==> resources.web init[0] echo hello-from-init (exit 0)", "resources.web | stdout: hello-from-init", "==> resources.web poll"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("logs lacks %q:\n%s", w, r.stdout)
		}
	}
	// Follow until two new polls are shown, then stop as Ctrl-C would.
	polls := func(out string) int { return strings.Count(out, "==> resources.web poll") }
	r = e.follow(time.Minute, func(out string) bool { return polls(out) >= 3 }, "logs", "--file", f, "-f", "--interval", "1s", "web")
	if r.code != 0 {
		t.Fatalf("logs -f: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := polls(r.stdout); n < 3 {
		t.Errorf("logs -f showed %d poll entries in a minute, want the persisted one and at least 2 new:\n%s%s", n, r.stdout, r.stderr)
	}
	if n := strings.Count(r.stdout, "init[0]"); n != 1 {
		t.Errorf("logs -f repeated the init entry %d times:\n%s", n, r.stdout)
	}
	e.must("destroy", f, "--yes")
}

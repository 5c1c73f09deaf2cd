package adapter_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/adapter"
	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/internal/syncwriter"
	"github.com/gcompose/gcompose/internal/testimage"
	"github.com/gcompose/gcompose/protocol"
)

const (
	adapterPkg = "./internal/testimage/testdata/testadapter"
	// adapterName names the test adapter image; testimage adds the
	// content's hash to its tag (env.image), so that another checkout's run
	// never replaces it.
	adapterName = "gcompose/testadapter:test"
)

// countingRunner records every container run.
type countingRunner struct {
	adapter.Runner
	mu    sync.Mutex
	specs []runner.Spec
}

func (c *countingRunner) Run(ctx context.Context, s runner.Spec) (*runner.Result, error) {
	c.mu.Lock()
	c.specs = append(c.specs, s)
	c.mu.Unlock()
	return c.Runner.Run(ctx, s)
}

// Start counts a serve-mode container as a call named "serve".
func (c *countingRunner) Start(ctx context.Context, s runner.Spec) (*runner.Session, error) {
	c.mu.Lock()
	c.specs = append(c.specs, s)
	c.mu.Unlock()
	return c.Runner.(adapter.SessionStarter).Start(ctx, s)
}

func (c *countingRunner) calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.specs))
	for i, s := range c.specs {
		out[i] = s.Call
	}
	return out
}

type env struct {
	ctx    context.Context
	runner *runner.Runner
	count  *countingRunner
	client *adapter.Client
	stderr *syncwriter.Buffer
	cache  string
	app    string
	// image is the test adapter image's reference.
	image string
}

// setup builds the test adapter image and a client with a fresh init cache;
// when the test ends it checks that no container of the test is left.
func setup(t *testing.T, mod func(*adapter.Options)) *env {
	t.Helper()
	testimage.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	image := testimage.Image(t, ctx, adapterPkg, adapterName)
	labels := testimage.Labels(t)
	r, err := runner.New(ctx, runner.Options{Labels: labels, Timeout: time.Minute})
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
	e := &env{ctx: ctx, runner: r, count: &countingRunner{Runner: r}, stderr: &syncwriter.Buffer{}, cache: t.TempDir(), app: "adaptertest", image: image}
	opts := adapter.Options{Runner: e.count, CacheDir: e.cache, Version: "test", Workspace: "/work", Stderr: e.stderr}
	if mod != nil {
		mod(&opts)
	}
	e.client, err = adapter.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) target(name string, config map[string]any, plugs map[string]adapter.Plug) adapter.Target {
	return adapter.Target{App: e.app, Name: name, Image: e.image, Config: config, Plugs: plugs}
}

func TestRoundTrip(t *testing.T) {
	e := setup(t, nil)
	dir := t.TempDir()
	tg := e.target("files.a", map[string]any{"content": "hello"}, map[string]adapter.Plug{"data": {Path: dir}})

	st, err := e.client.State(e.ctx, tg, protocol.Present, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != protocol.Stale || len(st.Actions) != 1 || st.Actions[0].Name != "write" || st.Gcompose == nil || st.Gcompose.Change != protocol.ChangeCreate {
		t.Fatalf("first state: %+v", st)
	}
	out, err := e.client.Action(e.ctx, tg, st.Actions[0], st.StaleState, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != "wrote 5 bytes to /data/files.a\n" || out.Identity["path"] != "/data/files.a" {
		t.Fatalf("action: %+v", out)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "files.a")); string(got) != "hello" {
		t.Fatalf("file content %q", got)
	}
	if !strings.Contains(e.stderr.String(), "[files.a] action write for files.a (staleState {\"old\":\"\"})\n") {
		t.Errorf("stderr not forwarded with prefix, or staleState not passed: %q", e.stderr.String())
	}
	persisted := &protocol.Persisted{Identity: out.Identity}
	st, err = e.client.State(e.ctx, tg, protocol.Present, persisted)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != protocol.Valid || st.State["content"] != "hello" {
		t.Fatalf("state after action: %+v", st)
	}

	// destroy
	st, err = e.client.State(e.ctx, tg, protocol.Absent, persisted)
	if err != nil || st.Status != protocol.Stale || st.Gcompose.Change != protocol.ChangeDelete {
		t.Fatalf("absent state: %+v %v", st, err)
	}
	if _, err := e.client.Action(e.ctx, tg, st.Actions[0], nil, persisted); err != nil {
		t.Fatal(err)
	}
	st, err = e.client.State(e.ctx, tg, protocol.Absent, persisted)
	if err != nil || st.Status != protocol.Valid {
		t.Fatalf("absent state after delete: %+v %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "files.a")); !os.IsNotExist(err) {
		t.Fatalf("file not deleted: %v", err)
	}
	want := []string{"init", "state", "action write", "state", "state", "action delete", "state"}
	if got := e.count.calls(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("calls %v, want %v (init once)", got, want)
	}
}

func TestRequestShape(t *testing.T) {
	for _, mode := range []string{"one-shot", "served"} {
		t.Run(mode, func(t *testing.T) {
			e := setup(t, nil)
			defer closeClient(t, e.client)
			name := "files.echo"
			if mode == "served" {
				name = "files.serve.echo"
			}
			tg := e.target(name, map[string]any{"mode": "echo"}, nil)
			tg.Lineage = "lineage-1"
			started := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
			persisted := &protocol.Persisted{Identity: map[string]any{"id": "x1"},
				Pending: &protocol.Operation{ID: "op-1", Kind: protocol.ChangeCreate, Action: "write", StartedAt: started}}
			st, err := e.client.State(e.ctx, tg, protocol.Present, persisted)
			if err != nil {
				t.Fatal(err)
			}
			req := st.State["request"].(map[string]any)
			want := map[string]any{"name": name, "type": e.image, "version": "test", "verbose": false, "workspace": "/work",
				"config": map[string]any{"mode": "echo"},
				"gcompose": map[string]any{"protocol": float64(1), "app": e.app, "call": "state", "desired": "present",
					"persisted": map[string]any{"identity": map[string]any{"id": "x1"},
						"pending": map[string]any{"id": "op-1", "kind": "create", "action": "write", "started_at": "2026-01-02T03:04:05.000000006Z"}},
					"lineage": "lineage-1"}}
			if a, b := js(req), js(want); a != b {
				t.Fatalf("state request\n got %s\nwant %s", a, b)
			}
			// plan's question about a resource it will remove and create
			// anew: no persisted record, as after the removal.
			rt := tg
			rt.Replace = true
			if st, err = e.client.State(e.ctx, rt, protocol.Present, nil); err != nil {
				t.Fatal(err)
			}
			want["gcompose"] = map[string]any{"protocol": float64(1), "app": e.app, "call": "state", "desired": "present", "lineage": "lineage-1", "replace": true}
			if a, b := js(st.State["request"]), js(want); a != b {
				t.Fatalf("replace state request\n got %s\nwant %s", a, b)
			}
			// An action carries the operation recorded for it.
			tg.Operation = &protocol.Operation{ID: "op-2", Kind: protocol.ChangeUpdate, Action: "echo", StartedAt: started}
			out, err := e.client.Action(e.ctx, tg, protocol.ActionSpec{Name: "echo", Args: []string{"action", "echo"}}, nil, &protocol.Persisted{Identity: map[string]any{"id": "x1"}})
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(out.Output), &got); err != nil {
				t.Fatalf("action stdin %q: %v", out.Output, err)
			}
			want = map[string]any{"name": name, "type": e.image, "version": "test", "verbose": false, "workspace": "/work",
				"config": map[string]any{"mode": "echo"}, "staleState": map[string]any{},
				"gcompose": map[string]any{"protocol": float64(1), "app": e.app, "call": "action", "action": "echo",
					"persisted": map[string]any{"identity": map[string]any{"id": "x1"}},
					"lineage":   "lineage-1",
					"operation": map[string]any{"id": "op-2", "kind": "update", "action": "echo", "started_at": "2026-01-02T03:04:05.000000006Z"}}}
			if a, b := js(got), js(want); a != b {
				t.Fatalf("action request\n got %s\nwant %s", a, b)
			}
		})
	}
}

func js(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestPlainDeploysterAdapter: an adapter that did not answer init with the
// gcompose member gets byte for byte what Deployster would send it, however
// much gcompose knows (lineage, pending and current operations, identity).
func TestPlainDeploysterAdapter(t *testing.T) {
	e := setup(t, nil)
	tg := e.target("plain.echo", map[string]any{"mode": "echo"}, nil)
	tg.Lineage = "lineage-1"
	tg.Operation = &protocol.Operation{ID: "op-2", Kind: protocol.ChangeCreate, Action: "echo", StartedAt: time.Now().UTC()}
	// plan never asks a plain adapter the replace question; were it asked,
	// nothing of it would reach the adapter either.
	tg.Replace = true
	info, err := e.client.Init(e.ctx, tg.Image, tg.Name)
	if err != nil {
		t.Fatal(err)
	}
	if info.Ext || info.Protocol != 0 {
		t.Fatalf("plain adapter seen as gcompose-aware: %+v", info)
	}
	persisted := &protocol.Persisted{Identity: map[string]any{"id": "x"},
		Pending: &protocol.Operation{ID: "op-1", Kind: protocol.ChangeCreate, StartedAt: time.Now().UTC()}}
	st, err := e.client.State(e.ctx, tg, protocol.Present, persisted)
	if err != nil {
		t.Fatal(err)
	}
	deployster := protocol.Request{Name: tg.Name, Type: tg.Image, Version: "test", Workspace: "/work", Config: tg.Config}
	var asMap map[string]any
	if err := json.Unmarshal([]byte(js(deployster)), &asMap); err != nil {
		t.Fatal(err)
	}
	if got, want := js(st.State["request"]), js(asMap); got != want {
		t.Fatalf("state request\n got %s\nwant %s", got, want)
	}
	// An action's stdin, compared as bytes: the echo action prints it.
	deployster.StaleState = json.RawMessage("{}")
	want, err := json.Marshal(deployster)
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.client.Action(e.ctx, tg, protocol.ActionSpec{Name: "echo", Args: []string{"action", "echo"}}, nil, persisted)
	if err != nil {
		t.Fatal(err)
	}
	if out.Output != string(want)+"\n" {
		t.Fatalf("action stdin\n got %s\nwant %s", out.Output, want)
	}
	if _, err := e.client.State(e.ctx, tg, protocol.Absent, nil); err == nil || !strings.Contains(err.Error(), "plain Deployster") {
		t.Fatalf("absent asked of a plain adapter: %v", err)
	}
	if _, err := e.client.Sweep(e.ctx, tg, protocol.SweepRequest{}); err == nil || !strings.Contains(err.Error(), "does not offer sweep") {
		t.Fatalf("sweep asked of a plain adapter: %v", err)
	}
}

func TestInitCached(t *testing.T) {
	e := setup(t, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.client.Init(e.ctx, e.image, "files.r"+string(rune('0'+i)))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := e.count.calls(); len(got) != 1 {
		t.Fatalf("8 concurrent inits of one image ran %d containers", len(got))
	}
	info, err := e.client.Init(e.ctx, e.image, "files.again")
	if err != nil || len(e.count.calls()) != 1 {
		t.Fatalf("second init ran a container: %v %v", e.count.calls(), err)
	}
	files, _ := filepath.Glob(filepath.Join(e.cache, "*.json"))
	if len(files) != 1 {
		t.Fatalf("init cache files %v", files)
	}

	// A new client (a new gcompose run) with the same cache dir: no init.
	count := &countingRunner{Runner: e.runner}
	c2, err := adapter.New(adapter.Options{Runner: count, CacheDir: e.cache})
	if err != nil {
		t.Fatal(err)
	}
	info2, err := c2.Init(e.ctx, e.image, "files.next-run")
	if err != nil {
		t.Fatal(err)
	}
	if len(count.calls()) != 0 {
		t.Fatalf("init from the disk cache ran %v", count.calls())
	}
	if info2.ImageID != info.ImageID || !info2.Ext || info2.Protocol != protocol.Version || js(info2.Init) != js(info.Init) {
		t.Fatalf("cached info %+v differs from %+v", info2, info)
	}

	// A corrupt cache file is ignored: init runs again.
	os.WriteFile(files[0], []byte("{garbage"), 0o644)
	count3 := &countingRunner{Runner: e.runner}
	c3, _ := adapter.New(adapter.Options{Runner: count3, CacheDir: e.cache})
	if _, err := c3.Init(e.ctx, e.image, "files.x"); err != nil || len(count3.calls()) != 1 {
		t.Fatalf("corrupt cache: %v, runs %v", err, count3.calls())
	}
}

func TestErrors(t *testing.T) {
	e := setup(t, nil)
	cases := []struct {
		name   string
		res    string
		config map[string]any
		want   []string
	}{
		{"bad protocol", "files.badproto", nil, []string{"files.badproto: init call: adapter image " + e.image + " speaks gcompose protocol 99, this gcompose speaks 1"}},
		{"init wrong shape", "files.badinit", nil, []string{`files.badinit: init call: answer invalid at (root): missing property "state_action"`, "init for files.badinit"}},
		{"init not JSON", "files.garbageinit", nil, []string{`files.garbageinit: init call: answer is not JSON`, `stdout began "hello, I am not JSON"`}},
		{"garbage", "services.db", map[string]any{"mode": "garbage"}, []string{"services.db: state call: answer is not JSON", `stdout began "this is not JSON {"`, "state for db"}}, // the adapter echoes the name it received: db
		{"wrong schema", "services.db", map[string]any{"mode": "wrongschema"}, []string{`services.db: state call: answer invalid at /actions/0: missing property "name"`, "stderr tail:", "state for db"}},
		{"bad status", "services.db", map[string]any{"mode": "badstatus"}, []string{`services.db: state call: answer invalid at /status`}},
		{"non-zero exit", "services.db", map[string]any{"mode": "exit"}, []string{"adapter " + e.image + " call state for services.db failed: exit code 3", "state: cannot reach the backend"}},
		{"timeout", "services.db", map[string]any{"mode": "hang"}, []string{"adapter " + e.image + " call state for services.db timed out after 10s", "state: hanging"}},
		{"huge", "services.db", map[string]any{"mode": "huge"}, []string{"adapter " + e.image + " call state for services.db refused: it wrote more than 1048576 bytes to stdout"}},
		{"config", "services.db", map[string]any{"count": -1}, []string{"services.db: config invalid at /count: must be at least 0"}},
		{"config type", "services.db", map[string]any{"content": 5}, []string{"services.db: config invalid at /content: got number, want string"}},
		{"required plug", "files.needplug", nil, []string{`files.needplug: adapter ` + e.image + ` requires plug "needed", which the descriptor does not define`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A fresh client per case: init is cached per image, and some
			// cases misbehave at init.
			c, err := adapter.New(adapter.Options{Runner: e.runner, Timeout: 10 * time.Second, InitTimeout: time.Minute, StdoutLimit: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.State(e.ctx, e.target(tc.res, tc.config, nil), protocol.Present, nil)
			if err == nil {
				t.Fatal("no error")
			}
			t.Log(err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
	var ae *adapter.AnswerError
	_, err := e.client.State(e.ctx, e.target("services.db", map[string]any{"mode": "wrongschema"}, nil), protocol.Present, nil)
	if !errors.As(err, &ae) || len(ae.Violations) == 0 || ae.Violations[0].Pointer != "/actions/0" {
		t.Fatalf("want an AnswerError at /actions/0, got %#v", err)
	}
	var ce *runner.CallError
	_, err = e.client.State(e.ctx, e.target("services.db", map[string]any{"mode": "exit"}, nil), protocol.Present, nil)
	if !errors.As(err, &ce) || ce.Kind != runner.KindExit {
		t.Fatalf("want a runner.CallError, got %#v", err)
	}
}

func TestConfigCheckedBeforeStateCall(t *testing.T) {
	e := setup(t, nil)
	if _, err := e.client.Init(e.ctx, e.image, "services.db"); err != nil {
		t.Fatal(err)
	}
	_, err := e.client.State(e.ctx, e.target("services.db", map[string]any{"count": "many"}, nil), protocol.Present, nil)
	var ce *adapter.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("want a ConfigError, got %v", err)
	}
	if got := e.count.calls(); len(got) != 1 {
		t.Fatalf("a state container ran for an invalid config: %v", got)
	}
}

func TestMissingImage(t *testing.T) {
	e := setup(t, nil)
	tg := e.target("services.db", nil, nil)
	tg.Image = "gcompose/nope:missing"
	_, err := e.client.State(e.ctx, tg, protocol.Present, nil)
	if err == nil || !strings.Contains(err.Error(), "services.db: image gcompose/nope:missing not found locally") {
		t.Fatalf("missing image: %v", err)
	}
}

func TestActionRunsAsTold(t *testing.T) {
	e := setup(t, nil)
	dir := t.TempDir()
	tg := e.target("files.b", map[string]any{"content": "hi"}, map[string]adapter.Plug{"data": {Path: dir}})
	// image, entrypoint and args given explicitly (a Deployster action may
	// name another image and entrypoint).
	a := protocol.ActionSpec{Name: "write", Image: e.image, Entrypoint: "/testadapter", Args: []string{"action", "write"}}
	out, err := e.client.Action(e.ctx, tg, a, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Identity["path"] != "/data/files.b" {
		t.Fatalf("action result %+v", out)
	}
	if !strings.Contains(e.stderr.String(), "(staleState {})") {
		t.Errorf("missing staleState not sent as {}: %q", e.stderr.String())
	}
	// A failing action is an error with its stderr tail.
	_, err = e.client.Action(e.ctx, tg, protocol.ActionSpec{Name: "fail", Args: []string{"action", "fail"}}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "call action fail for files.b failed: exit code 1") || !strings.Contains(err.Error(), "action failed on purpose") {
		t.Fatalf("failing action: %v", err)
	}
	// A plain Deployster adapter's action output is free text, untouched.
	plain := e.target("plain.c", map[string]any{"content": "yo"}, map[string]adapter.Plug{"data": {Path: dir}})
	c, _ := adapter.New(adapter.Options{Runner: e.runner})
	out, err = c.Action(e.ctx, plain, protocol.ActionSpec{Name: "write", Args: []string{"action", "write"}}, nil, nil)
	if err != nil || out.Output != "wrote 2 bytes to /data/plain.c\n" || out.Identity != nil {
		t.Fatalf("plain action: %+v %v", out, err)
	}
}

func TestEnvOnStdinOnly(t *testing.T) {
	e := setup(t, func(o *adapter.Options) {
		o.LookupEnv = func(name string) (string, bool) {
			if name == "TESTADAPTER_KEY" {
				return "s3cret", true
			}
			return "", false
		}
	})
	st, err := e.client.State(e.ctx, e.target("files.withenv", map[string]any{"mode": "echo"}, nil), protocol.Present, nil)
	if err != nil {
		t.Fatal(err)
	}
	ext := st.State["request"].(map[string]any)["gcompose"].(map[string]any)
	if js(ext["env"]) != `{"TESTADAPTER_KEY":"s3cret"}` {
		t.Fatalf("env sent %v", ext["env"])
	}
	for _, s := range e.count.specs {
		if strings.Contains(js(s.Args)+js(s.Labels)+js(s.Entrypoint), "s3cret") {
			t.Fatalf("secret outside stdin: %+v", s)
		}
	}
}

func TestInitFailureRemembered(t *testing.T) {
	e := setup(t, nil)
	_, err := e.client.Init(e.ctx, e.image, "files.badproto")
	if err == nil || !strings.HasPrefix(err.Error(), "files.badproto: init call:") {
		t.Fatalf("first: %v", err)
	}
	_, err = e.client.State(e.ctx, e.target("files.other", nil, nil), protocol.Present, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "files.other: adapter image "+e.image+" unusable: files.badproto: init call:") {
		t.Fatalf("second: %v", err)
	}
	if got := e.count.calls(); len(got) != 1 {
		t.Fatalf("a failed init ran again: %v", got)
	}
	// A failure of the caller's own context is not remembered.
	c, _ := adapter.New(adapter.Options{Runner: e.count})
	canceled, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, err := c.Init(canceled, e.image, "files.x"); err == nil {
		t.Fatal("init with a canceled context succeeded")
	}
	if _, err := c.Init(e.ctx, e.image, "files.x"); err != nil {
		t.Fatalf("init after a canceled one: %v", err)
	}
}

func TestNetworkAsInitSays(t *testing.T) {
	for _, tc := range []struct{ name, want string }{{"files.isolated", `["lo"]`}, {"files.bridged", `["eth0","lo"]`}} {
		e := setup(t, nil)
		st, err := e.client.State(e.ctx, e.target(tc.name, map[string]any{"mode": "ifaces"}, nil), protocol.Present, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := st.State["interfaces"].([]any)
		names := make([]string, len(got))
		for i, n := range got {
			names[i] = n.(string)
		}
		sort.Strings(names)
		if js(names) != tc.want {
			t.Errorf("%s: interfaces %v, want %s", tc.name, names, tc.want)
		}
	}
}
